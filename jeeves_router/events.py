"""Typed run events: one discriminated union on a literal ``kind``.

Every event carries ``session_id`` (of the agent that emitted it), ``path`` (its route
path, e.g. ``("desk", "billing")``) and ``ts`` (wall-clock seconds). Consumers ``match``
on the class or on ``kind``::

    async for ev in desk.stream("The API returns 500"):
        match ev:
            case RouterClassified(route=r, confidence=c):
                ...
            case TextDelta(text=t):
                print(t, end="")

Events are plain data: they hold no secrets and serialise to JSON through
:func:`event_adapter`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import field
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal, Union

from ._frozen import frozen
from ._lazy import lazy_exports
from .results import RunResult
from .usage import NO_USAGE, Usage

if TYPE_CHECKING:
    from pydantic import TypeAdapter

    from ._routing import ROUTING_KINDS, routing_update

__all__ = [
    "Event",
    "EventBase",
    "RunStarted",
    "RunCompleted",
    "RunFailed",
    "TextDelta",
    "ToolCalled",
    "ToolResult",
    "RouterClassified",
    "RouterDispatched",
    "RouterFallback",
    "RouterUnresolved",
    "RouterCompleted",
    "HandoffRequested",
    "HandoffCompleted",
    "HandoffRejected",
    "RecoveryRetry",
    "RecoveryReclassify",
    "RecoveryReplan",
    "RecoveryReport",
    "CapabilitiesSelected",
    "CapabilityStarted",
    "CapabilityCompleted",
    "event_adapter",
    "routing_update",
    "ROUTING_KINDS",
]

_now = time.time


@frozen(kw_only=True)
class EventBase:
    """Fields every event has."""

    session_id: str
    path: tuple[str, ...]
    ts: float = field(default_factory=_now)


@frozen(kw_only=True)
class RunStarted(EventBase):
    """An agent started a run."""

    agent: str
    prompt: str
    kind: Literal["run.started"] = "run.started"


@frozen(kw_only=True)
class RunCompleted(EventBase):
    """An agent finished a run (any status but a raised error)."""

    result: RunResult
    kind: Literal["run.completed"] = "run.completed"


@frozen(kw_only=True)
class RunFailed(EventBase):
    """An agent's run raised. ``run()`` re-raises the original exception.

    Attributes:
        error_type: The exception's class name.
        message: Its message.
        severity: Its recovery severity, for a :class:`~jeeves_router.errors.RunError`.
        usage: What the run had spent when it failed: every model request it sent (failed
            ones included, as ``RunResult.usage`` counts them) and the runs below it (a routed
            specialist, a handoff target, a classifier). The exception ``run()`` raises
            carries the root run's as its ``spent_usage``
            (:func:`~jeeves_router.usage.spent_usage`).
    """

    error_type: str
    message: str
    severity: str | None = None
    usage: Usage = NO_USAGE
    kind: Literal["run.failed"] = "run.failed"


@frozen(kw_only=True)
class TextDelta(EventBase):
    """A piece of an agent's answer, as the model produced it."""

    text: str
    kind: Literal["text.delta"] = "text.delta"


@frozen(kw_only=True)
class ToolCalled(EventBase):
    """A tool is about to run."""

    call_id: str
    tool: str
    arguments: Mapping[str, Any]
    kind: Literal["tool.called"] = "tool.called"


@frozen(kw_only=True)
class ToolResult(EventBase):
    """A tool returned (or failed; then ``is_error``).

    ``from_ledger``: the tool did not run again; a framework retry's call was answered with
    the outcome of the same call (same tool, same arguments) that an earlier attempt of the
    run completed, from the run's attempt ledger (a refund is not paid twice).
    """

    call_id: str
    tool: str
    content: str
    is_error: bool = False
    from_ledger: bool = False
    kind: Literal["tool.result"] = "tool.result"


@frozen(kw_only=True)
class RouterClassified(EventBase):
    """The router's classifier answered.

    ``status`` is the parse status; ``stage`` names the classifier stage that decided
    (``"llm"``, ``"embedding"``, ``"cascade:llm"``, ...); ``margin`` is the confidence
    minus the runner-up's, when known.
    """

    route: str | None
    confidence: float
    status: str
    threshold: float
    raw: str
    reason: str | None = None
    requested: str | None = None
    runner_up: str | None = None
    runner_up_confidence: float | None = None
    margin: float | None = None
    stage: str = "llm"
    attempts: int = 1
    model_calls_saved: int = 0
    kind: Literal["router.classified"] = "router.classified"


@frozen(kw_only=True)
class RouterDispatched(EventBase):
    """The router handed the request to a route's agent."""

    route: str
    child_session_id: str
    forced: bool = False
    kind: Literal["router.dispatched"] = "router.dispatched"


@frozen(kw_only=True)
class RouterFallback(EventBase):
    """The fallback route is used instead of the classified one; ``reason`` says why."""

    reason: str
    fallback_route: str
    requested_route: str | None = None
    confidence: float | None = None
    kind: Literal["router.fallback"] = "router.fallback"


@frozen(kw_only=True)
class RouterUnresolved(EventBase):
    """No route could be chosen and there is no fallback: the run ends unresolved."""

    reason: str
    requested_route: str | None = None
    confidence: float | None = None
    kind: Literal["router.unresolved"] = "router.unresolved"


@frozen(kw_only=True)
class RouterCompleted(EventBase):
    """The routed specialist finished: the agent that answered the turn (``RunResult.route``).

    ``usage`` is ``RunResult.usage_by_route[route]``: everything that agent spent in the
    turn, every attempt (the failed ones a Router with recovery retried) and every visit
    (an agent handed the turn back to answers on a later visit) included. The run's
    ``RunResult.usage`` also counts the classifier, the routes tried before a
    reclassification and the agents that handed off on the way.
    """

    route: str
    status: str
    usage: Usage
    kind: Literal["router.completed"] = "router.completed"


@frozen(kw_only=True)
class HandoffRequested(EventBase):
    """An agent asked to hand the conversation to another."""

    from_agent: str
    to_agent: str
    reason: str | None = None
    confidence: float | None = None
    kind: Literal["handoff.requested"] = "handoff.requested"


@frozen(kw_only=True)
class HandoffCompleted(EventBase):
    """A handoff took place; ``to_agent`` now has the turn (``sticky``: by session memory)."""

    from_agent: str
    to_agent: str
    reason: str | None = None
    sticky: bool = False
    kind: Literal["handoff.completed"] = "handoff.completed"


@frozen(kw_only=True)
class HandoffRejected(EventBase):
    """A handoff was refused: ``why`` is unknown, duplicate, limit, cycle, low_confidence or no_handoff.

    ``duplicate``: a second handoff call in a turn that had handed off, answered "ignored"
    and never run: a ``transfer_to_<agent>`` tool (``to_agent`` names the agent) or the
    agent's own tool declared ``-> Handoff`` (its target is not known: ``to_agent`` is empty).
    ``no_handoff``: the agent announced a handoff in text but called no handoff tool.
    """

    from_agent: str
    to_agent: str
    why: Literal["unknown", "duplicate", "limit", "cycle", "low_confidence", "no_handoff"]
    reason: str | None = None
    kind: Literal["handoff.rejected"] = "handoff.rejected"


@frozen(kw_only=True)
class RecoveryRetry(EventBase):
    """A failed step will be tried again after ``delay_s``."""

    operation: str
    attempt: int
    delay_s: float
    severity: str
    error: str
    kind: Literal["recovery.retry"] = "recovery.retry"


@frozen(kw_only=True)
class RecoveryReclassify(EventBase):
    """The request is classified again, without the failed routes or capabilities."""

    attempt: int
    excluded: tuple[str, ...]
    error: str
    kind: Literal["recovery.reclassify"] = "recovery.reclassify"


@frozen(kw_only=True)
class RecoveryReplan(EventBase):
    """A new plan is requested after a failure."""

    attempt: int
    error: str
    kind: Literal["recovery.replan"] = "recovery.replan"


@frozen(kw_only=True)
class RecoveryReport(EventBase):
    """Recovery stopped the run; ``report`` is the structured error report."""

    severity: str
    user_message: str
    report: Mapping[str, Any]
    kind: Literal["recovery.report"] = "recovery.report"


@frozen(kw_only=True)
class CapabilitiesSelected(EventBase):
    """The capabilities chosen for a task."""

    capabilities: tuple[str, ...]
    always_active: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()
    bypass: bool = False
    kind: Literal["capabilities.selected"] = "capabilities.selected"


@frozen(kw_only=True)
class CapabilityStarted(EventBase):
    """A capability step began."""

    capability: str
    step: int = 0
    kind: Literal["capability.started"] = "capability.started"


@frozen(kw_only=True)
class CapabilityCompleted(EventBase):
    """A capability step ended.

    ``answered_from`` is the number of an earlier step of the run whose result answered
    this one without running it (a plan made after a replan or reclassification repeated
    a completed step: same capability, same task); ``0`` when the step ran.

    ``from_ledger``: a function capability's call did not run again; a framework retry's
    call was answered with the output of the same call (same capability, same task) that an
    earlier attempt of the run completed, from the run's attempt ledger, as a tool call's
    ``tool.result`` says with its own ``from_ledger`` (a card is not charged twice).
    """

    capability: str
    duration_s: float
    ok: bool = True
    step: int = 0
    answered_from: int = 0
    from_ledger: bool = False
    kind: Literal["capability.completed"] = "capability.completed"


Event = Union[
    RunStarted,
    RunCompleted,
    RunFailed,
    TextDelta,
    ToolCalled,
    ToolResult,
    RouterClassified,
    RouterDispatched,
    RouterFallback,
    RouterUnresolved,
    RouterCompleted,
    HandoffRequested,
    HandoffCompleted,
    HandoffRejected,
    RecoveryRetry,
    RecoveryReclassify,
    RecoveryReplan,
    RecoveryReport,
    CapabilitiesSelected,
    CapabilityStarted,
    CapabilityCompleted,
]


@lru_cache(maxsize=1)
def event_adapter() -> TypeAdapter[Event]:
    """A pydantic TypeAdapter that dumps and validates any :data:`Event` (JSON-ready)."""
    from typing import Annotated

    from pydantic import Field, TypeAdapter

    return TypeAdapter(Annotated[Event, Field(discriminator="kind")])


# What a root routing event says of its turn's route (:mod:`jeeves_router._routing`), exported here.
__getattr__, __dir__ = lazy_exports(__name__, {"jeeves_router._routing": ("ROUTING_KINDS", "routing_update")})
