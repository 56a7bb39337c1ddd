"""Capability data: the capability itself, its selection guide, and what a handler gets.

Public names are re-exported by :mod:`jeeves_router.architectures.capabilities`.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Union

from ..._args import check_hook, check_text_and_examples, listed
from ...errors import UsageError
from ...ids import validate_route_name
from ...policies import DEFAULT_RETRY, RetryPolicy
from ...recovery.classify import ErrorHook
from ...results import RunStatus
from ...usage import NO_USAGE, Usage, spent_usage

if TYPE_CHECKING:
    from ...ledger import Ledger
    from ...recovery.run import RecoveryRun

__all__ = [
    "Capability",
    "CapabilityCall",
    "CapabilityFunction",
    "CapabilityOutput",
    "ClassifierExample",
    "ClassifierGuide",
    "RunState",
]


@dataclass(frozen=True, slots=True)
class ClassifierExample:
    """A few-shot example of the selection call: ``query`` needs the capability iff ``result``."""

    query: str
    result: bool
    reason: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.query, str) or not isinstance(self.reason, str):
            raise UsageError(
                f"ClassifierExample: query and reason must be strings, got {self.query!r}, {self.reason!r}"
            )
        if not isinstance(self.result, bool):  # "no" would read as needed
            raise UsageError(f"ClassifierExample {self.query!r}: result must be True or False, got {self.result!r}")


@dataclass(frozen=True, slots=True)
class ClassifierGuide:
    """How to decide whether a capability is needed: instructions and examples (kept in order)."""

    instructions: str
    examples: Sequence[ClassifierExample] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.instructions, str):
            raise UsageError(f"ClassifierGuide: instructions must be a string, got {self.instructions!r:.60}")
        example = "examples=[ClassifierExample('show my invoices', True)]"
        object.__setattr__(
            self, "examples", tuple(listed(self.examples, what="ClassifierGuide examples", example=example))
        )
        for ex in self.examples:
            if not isinstance(ex, ClassifierExample):
                raise UsageError(f"ClassifierGuide examples must be ClassifierExample objects, got {type(ex).__name__}")


@dataclass(frozen=True, slots=True)
class CapabilityCall:
    """What a function handler receives.

    Attributes:
        task: What this step must do.
        objective: The whole task.
        context: The run's context variables, provided types included (read-only).
        results: Earlier steps as ``(capability, output)`` pairs.
        session_id: The step's session id.
        path: The step's route path.
        attempt: The 1-based attempt of this step.
    """

    task: str
    objective: str
    context: Mapping[str, Any]
    results: tuple[tuple[str, str], ...]
    session_id: str
    path: tuple[str, ...]
    attempt: int = 1


@dataclass(frozen=True, slots=True)
class CapabilityOutput:
    """A function handler's full answer: text, context updates and usage."""

    text: str
    context: Mapping[str, Any] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)


CapabilityFunction = Callable[[CapabilityCall], Awaitable[Union[str, CapabilityOutput]]]


@dataclass(frozen=True)
class Capability:
    """A unit of work the orchestrator can plan with.

    Args:
        name: Unique name (letters/digits joined by '-' or '_').
        handler: An :class:`~jeeves_router.Agent`, or ``async def f(call: CapabilityCall)``
            returning a string or a :class:`CapabilityOutput`.
        description: What it does (shown to the selector and the orchestrator).
        guide: Few-shot guidance for its selection call.
        always_active: Selected for every task, without a call.
        requires: Context types it needs (keys of the run's context).
        provides: Context types it sets (to its output text unless it sets them itself).
        classify_error: Hook ``(exc, context) -> ErrorClassification | None``.
        retry_policy: Its retry policy (default: the recovery config's, 3 x 0.5 s x1.5).
        repeatable: A function handler harmless to call twice (a read), as
            :attr:`Tool.repeatable <jeeves_router.tools.Tool.repeatable>`. A function handler's
            call is a call as a tool's is: a journal marks it started, sets
            :func:`~jeeves_router.journal.current_idempotency_key` around it (pass it on to
            the system that charges or sends), and a resume after a crash during it applies
            ``on_unknown_tool_outcome`` (default ``"fail"``: not called again); a framework
            retry (a Router's of the route) after it completed is answered from the run's
            ledger. A ``repeatable`` one is called again in both cases. Not for an agent
            handler: its tools carry their own flag.
    """

    name: str
    handler: Any
    description: str = ""
    guide: ClassifierGuide | None = None
    always_active: bool = False
    requires: Sequence[str] = ()
    provides: Sequence[str] = ()
    classify_error: ErrorHook | None = None
    retry_policy: RetryPolicy | None = None
    repeatable: bool = False

    @property
    def is_agent(self) -> bool:
        """Whether the handler is an :class:`~jeeves_router.Agent` (else an async function).

        Told by what an agent has (its event emitter): this layer does not import the agent's.
        """
        return hasattr(self.handler, "_events")

    def __post_init__(self) -> None:
        validate_route_name(self.name, what="capability name")
        check_text_and_examples(f"capability {self.name!r}", self.description)
        is_agent = self.is_agent
        is_async = inspect.iscoroutinefunction(self.handler) or (
            callable(self.handler) and inspect.iscoroutinefunction(type(self.handler).__call__)
        )
        if not (is_agent or is_async):
            raise UsageError(
                f"capability {self.name!r}: handler must be an Agent or an async function, "
                f"got {type(self.handler).__name__}"
            )
        check_hook(self.classify_error, f"capability {self.name!r}")
        if self.retry_policy is not None and not isinstance(self.retry_policy, RetryPolicy):
            raise UsageError(f"capability {self.name!r}: retry_policy must be a RetryPolicy(...) or None")
        if not isinstance(self.repeatable, bool):
            raise UsageError(f"capability {self.name!r}: repeatable must be True or False, got {self.repeatable!r}")
        if self.repeatable and is_agent:
            raise UsageError(
                f"capability {self.name!r}: repeatable applies to a function capability; its agent's tools "
                "carry their own (tool(fn, repeatable=True))"
            )
        if not isinstance(self.always_active, bool):
            raise UsageError(f"capability {self.name!r}: always_active must be True or False")
        if self.guide is not None and not isinstance(self.guide, ClassifierGuide):
            raise UsageError(f"capability {self.name!r}: guide must be a ClassifierGuide")
        for attr in ("requires", "provides"):
            value = getattr(self, attr)
            if isinstance(value, str) or not all(isinstance(v, str) for v in value):
                raise UsageError(f"capability {self.name!r}: {attr} must be a sequence of strings, e.g. ('invoices',)")
            object.__setattr__(self, attr, tuple(value))

    def get_retry_policy(self, default: RetryPolicy = DEFAULT_RETRY) -> RetryPolicy:
        """Its retry policy, or ``default``."""
        return self.retry_policy or default


#: ``usage_by_route`` key of the selection calls.
SELECTION_USAGE_KEY = "<classifier>"
#: ``usage_by_route`` key of task extraction, planning and ReAct decisions.
ORCHESTRATOR_USAGE_KEY = "<orchestrator>"


#: What a completed step did: ``"effects"`` (it completed a call of a tool, or of a function
#: capability, that is not ``repeatable``), ``"reads"`` (calls of ``repeatable`` ones only) or
#: ``""`` (no such call).
StepDid = Literal["effects", "reads", ""]


@dataclass(slots=True)
class RunState:
    """What one run has done so far.

    ``ledger`` and ``path`` are the run's ledger and route path: the usage counted here is
    entered in the ledger too (:meth:`add`), so an enclosing retry of this run (a Router's
    of its route) counts what a failed attempt of it spent (see :mod:`jeeves_router.ledger`).
    """

    ledger: Ledger | None = None
    path: tuple[str, ...] = ()
    usage: Usage = field(default_factory=Usage)
    by_route: dict[str, Usage] = field(default_factory=dict)
    done: list[tuple[str, str]] = field(default_factory=list)
    selected: tuple[str, ...] = ()
    plan: tuple[tuple[str, str], ...] = ()
    excluded: list[str] = field(default_factory=list)
    steps: int = 0
    # (capability, task) -> (plan generation, step number, result text, what it did) of each completed step
    completed: dict[tuple[str, str], list[tuple[int, int, str, StepDid]]] = field(default_factory=dict)
    # (capability, task) -> (plan generation, how many earlier completions that plan has answered from)
    answered: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)
    task: str = ""
    output: str | None = None
    status: RunStatus = "ok"

    def complete(self, name: str, task: str, generation: int, index: int, text: str, *, did: StepDid) -> None:
        """Remember step ``index`` (capability ``name``, ``task``) of plan ``generation`` and its result.

        ``did``: ``"effects"`` when the step completed a call of a tool that is not
        ``repeatable`` (a refund), ``"reads"`` when it called only ``repeatable`` tools, ``""``
        when it called none.
        """
        self.completed.setdefault((name, task), []).append((generation, index, text, did))

    def earlier(self, name: str, task: str, generation: int) -> tuple[int, int, str] | None:
        """The completion that answers this step of plan ``generation`` instead of running it, if any.

        A completion with effects (it completed a call of a tool that is not ``repeatable``,
        such as a refund) answers every later step with the same capability and task, in its
        own plan too: that step never runs twice. A completion that called only ``repeatable``
        tools (reads) answers none: the step runs again and reads afresh, as a retry does. One
        that called no tool answers one step of a later plan, in order: a new plan that repeats
        it twice has its second one run afresh unless an earlier plan completed it twice too,
        and a repeat within one plan runs again.
        """
        key = (name, task)
        for gen, index, text, did in self.completed.get(key, ()):
            if did == "effects":
                return gen, index, text
        done = [c[:3] for c in self.completed.get(key, ()) if c[0] < generation and c[3] != "reads"]
        used = self.answered.get(key)
        n = used[1] if used is not None and used[0] == generation else 0
        if n >= len(done):
            return None
        self.answered[key] = (generation, n + 1)
        return done[n]

    def add(self, key: str, usage: Usage, rec: RecoveryRun, *, entered: bool = False) -> None:
        """Count ``usage`` under ``key`` (and in the recovery report's total), and in the ledger.

        ``entered``: the ledger has it already (a capability agent's model calls, entered by
        its own run), so it is not entered again.
        """
        if not entered and self.ledger is not None and usage is not NO_USAGE:
            self.ledger.spent((*self.path, key), usage)
        self.usage = self.usage + usage
        self.by_route[key] = self.by_route.get(key, Usage()) + usage
        rec.usage = self.usage

    def spent(self, key: str, exc: BaseException, rec: RecoveryRun) -> None:
        """Count what the failed calls behind ``exc`` spent (its ``spent_usage``) under ``key``."""
        used = spent_usage(exc)
        if used is not None:
            self.add(key, used, rec)

    def metadata(self, mode: str) -> dict[str, Any]:
        """The run's ``RunResult.metadata``: mode, plan, steps done, exclusions."""
        return {
            "mode": mode,
            "task": self.task,
            "capabilities": self.selected,
            "excluded": tuple(self.excluded),
            "plan": self.plan,
            "steps": tuple(c for c, _ in self.done),
        }
