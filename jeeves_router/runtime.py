"""The durability port: every model call, tool call and routing decision passes here.

Architectures never call a model, a tool or a classifier directly; they call the
:class:`Runtime` of the run, which by default just performs the step. A journaling
runtime (see ``jeeves_router.journal``) records each step keyed by session id, run id,
step name and a digest of the step's input, and replays it instead of calling again.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Literal, NamedTuple, TypeVar

from .models.base import Model, ModelRequest, ModelStreamItem
from .usage import Usage

__all__ = [
    "Runtime",
    "StepKey",
    "PASS_THROUGH",
    "CALL_STEPS",
    "is_call",
    "LimitWhen",
    "RecordedLimit",
    "current_idempotency_key",
    "idempotency_scope",
    "JOURNAL_IN_CODE",
    "journal_advice",
]

T = TypeVar("T")

#: Where a run's time limit ended an attempt: ``"before"`` it started, ``"during"`` it (the
#: time box cut it off) or ``"after"`` it failed (the failure was judged past the limit).
LimitWhen = Literal["before", "during", "after"]


class StepKey(NamedTuple):
    """Identifies a step: session, run (turn), name and 0-based index within the run.

    A named tuple (immutable, hashable, compared by value): one is made per step of every
    run, and a tuple is the cheapest immutable record to make.
    """

    session_id: str
    run_id: str
    name: str
    index: int  # type: ignore[assignment]  # the step position; shadows tuple.index, which no key needs


#: The name prefixes of the steps that are calls with possible effects: a tool's call, and a
#: function capability's (an async function the Capabilities architecture calls, not an agent).
#: A recording runtime marks such a step started before it runs, applies its
#: ``on_unknown_tool_outcome`` to one that started and never recorded an outcome (a crash
#: during it), and sets :func:`current_idempotency_key` around it.
CALL_STEPS = ("tool:", "capability:")


def is_call(key: StepKey) -> bool:
    """Whether ``key`` names a call with possible effects (see :data:`CALL_STEPS`)."""
    return key.name.startswith(CALL_STEPS)


class RecordedLimit(NamedTuple):
    """What a recorded run's time limit did to one attempt (see :meth:`Runtime.recorded_limit`).

    Attributes:
        when: ``""`` when the limit did not end the attempt, else a :data:`LimitWhen`.
        spent: For ``"during"``: what the model calls the time box cut off had spent (their
            requests count: they were sent), ``None`` when nothing.
    """

    when: LimitWhen | Literal[""]
    spent: Usage | None = None


#: How code gives an agent a journal (what :meth:`Runtime.without_journal` says by default).
JOURNAL_IN_CODE = "construct it with runtime=JournalRuntime(SQLiteJournal(path))"


def journal_advice(runtime: object, attach: str = "") -> str:
    """:meth:`Runtime.without_journal` of ``runtime`` (a runtime that is no :class:`Runtime` gets the default).

    Args:
        runtime: The agent's runtime.
        attach: How the caller's front door gives an agent a journal (see :meth:`Runtime.without_journal`).
    """
    own = getattr(runtime, "without_journal", None)
    said = own(attach) if callable(own) else None
    return said if isinstance(said, str) else Runtime.without_journal(PASS_THROUGH, attach)


class Runtime:
    """Pass-through runtime: performs each step without recording it.

    Subclasses override :meth:`step` and :meth:`model_stream` to record and replay.

    Attributes:
        honours_idempotency_keys: Whether a root run may carry a client's idempotency key
            (``Agent.run(..., idempotency_key=...)``): only a runtime that records runs can
            find the run a key named before.
    """

    honours_idempotency_keys: bool = False

    def without_journal(self, attach: str = "") -> str:
        """Why a run cannot have what only a journal gives (an idempotency key, ``Agent.resume``), and what to do.

        Every front door that refuses such a request says this (``agent.run``, the served
        ``Idempotency-Key`` header, the MCP ``ask`` key: :func:`journal_advice`), so a runtime
        that has its own way (DBOS: workflow ids) overrides it, and is never told to add a
        journal that a server would then refuse for it.

        Args:
            attach: How the caller's front door gives an agent a journal (a server: its
                ``--journal`` option); empty: :data:`JOURNAL_IN_CODE`.
        """
        return f"its runtime does not journal runs; {attach or JOURNAL_IN_CODE}"

    def step(
        self, key: StepKey, input: Any, fn: Callable[[], Awaitable[T]], *, repeatable: bool = False
    ) -> Awaitable[T]:
        """Perform a non-streamed step (tool call, classification): ``await runtime.step(...)`` gives its result.

        The pass-through runtime returns ``fn()`` itself (no coroutine layer of its own);
        a subclass usually overrides it with an ``async def`` that records the result.

        Args:
            key: The step's identity.
            input: A JSON-ready description of the step's input (digested for replay).
            fn: Performs the step.
            repeatable: The step is a call (:func:`is_call`) of a ``repeatable`` tool or
                function capability (harmless to call twice): a recording runtime calls it
                again where its outcome is unknown (a crash during it), whatever its
                ``on_unknown_tool_outcome`` says.
        """
        return fn()

    def model_stream(self, key: StepKey, model: Model, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        """Perform one streamed model call."""
        return model.stream(request)

    async def recorded_limit(self, key: StepKey, attempt: int) -> RecordedLimit | None:
        """Replaying a completed run: what the run's time limit did to an attempt.

        The wall clock is the one input of the recovery ladder a replay does not
        reproduce, so a durable runtime (a journal, DBOS) records where the limit ended an
        attempt (:meth:`record_limit`) and a replay asks here instead of reading the clock.

        Args:
            key: The attempt's key (name ``limit:<operation>``, the run's step position).
            attempt: The ladder's count of attempts, this one included.

        Returns:
            ``None`` when this is no replay of a completed run (read the clock), else what
            the limit did to this attempt (and what the calls it cut off had spent).
        """
        return None

    def record_limit(self, key: StepKey, attempt: int, when: LimitWhen, spent: Usage | None = None) -> None:
        """Note that the run's time limit ended attempt ``attempt`` (see :meth:`recorded_limit`); nothing to do here.

        Synchronous (the ladder decides outside any await): a durable runtime writes the note
        with its next record, before anything that follows the stop is recorded.

        ``spent``: for ``"during"``, what the model calls the time box cut off had spent.
        """


PASS_THROUGH = Runtime()


_IDEMPOTENCY_KEY: ContextVar[str | None] = ContextVar("jeeves_idempotency_key", default=None)


def current_idempotency_key() -> str | None:
    """The idempotency key of the tool call (or function capability call) being performed (``None`` outside one).

    A durable runtime (the journal, DBOS) sets it around each such call (:func:`is_call`), stable across
    replays, resumes and recoveries. A tool that changes the world (a payment, an email)
    can pass it to the remote system to make a repeated call harmless; tools of an MCP
    server receive it in the request's ``_meta`` (see :mod:`jeeves_router.mcp`). It is the
    same on every attempt of the same call. Sync tools run in a worker thread and see it
    too (the context is copied).
    """
    return _IDEMPOTENCY_KEY.get()


@contextmanager
def idempotency_scope(key: str) -> Iterator[None]:
    """Set :func:`current_idempotency_key` for the duration of a step (used by durable runtimes)."""
    token = _IDEMPOTENCY_KEY.set(key)
    try:
        yield
    finally:
        _IDEMPOTENCY_KEY.reset(token)
