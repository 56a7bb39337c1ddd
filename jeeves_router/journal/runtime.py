"""JournalRuntime: record every step of a run, replay recorded steps, resume after a crash.

This module holds the run half (a root run's start, end, cut-off, resume, idempotency key);
the step half is :mod:`.steps`.

How a run finds its record. ``agent.run()`` and ``agent.stream()`` always start a new run
(a new run id) and execute it live, whatever the journal holds: durability is explicit.
Only :meth:`Agent.resume` replays: it picks a recorded run of the session (the last
unfinished one, else the last one, or the ``run_id`` it is given) and runs it again under
that run id, with the recorded input, as a new attempt; two resumes at once each claim an
attempt of their own (:func:`.resume.claim_attempt`). The one other way in: a run given a
client's idempotency key (``agent.run(..., idempotency_key=k)``) runs under the run id the
key names, so a retry with the same key takes that run up as a resume does (replays it if
it completed, finishes it if it was cut off) instead of starting another (:mod:`.keyed`).

How a step finds its record. Each step is keyed by (session, run, step index) and the
digest of its input (for a model call: the model's name and the whole request). A
recorded step with the same digest is served from the journal — the model is not called,
its text chunks are re-yielded as they were streamed. A step with no record is performed
live and recorded; a step whose position holds a record with another digest is performed
live (or raises ``ReplayDivergence`` in strict mode).

Tool calls. Before a tool runs, a ``tool.started`` entry with the call's idempotency key
(:func:`current_idempotency_key`, stable across resumes) is written. A started call with
no recorded result and no recorded failure (a tool that raised is retried like any failed
step) had an unknown outcome (the process died during it), and so does one that raised
:class:`~jeeves_router.errors.ToolOutcomeUnknown` (it may have run); on resume,
``on_unknown_tool_outcome`` decides (``"fail"``, ``"retry"`` or ``"skip"``, see
:mod:`.idempotency`), as it does for the loser when two processes execute one run at once;
a ``repeatable`` tool's call cut by a crash is called again whatever the policy. A function
capability's call (``Capability(name, async_fn, ..., repeatable=...)``) is a call here too.

Failed attempts are recorded (``step.failed``); resuming a *completed* run raises them
again where they happened, so a run that ended on a failure replays to the same result
with no call (:mod:`.failures`) — where its time limit ended an attempt included.

Events are written with the run's next recorded step, or its ``run.end``. A run cut off
between two steps (cancelled, or its stream closed early) writes them as it is cut, with a
``run.end`` of status ``cut``: the journal keeps what its consumer saw, the run stays
resumable (it did not complete), and a keyed retry on another runtime resumes it at once
instead of waiting ``in_flight_s`` (as it must for a process that died unwritten). That write
is shielded from the cancellation and given up after ``flush_timeout_s`` (then, or if it
fails, it is logged). Not recorded: events buffered when the process dies (resume redoes them).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import asdict
from typing import TYPE_CHECKING

import anyio

from .._log import get_logger
from .._shown import shown_message
from ..errors import UsageError
from ..events import Event, event_adapter
from ..ids import keyed_run_id
from ..usage import Usage, cut_requests_from_now
from .base import Journal
from .idempotency import UnknownToolPolicy, current_idempotency_key
from .keyed import claim_keyed_run
from .records import EventRecord, RunEndRecord, RunStartRecord
from .resume import ResumePoint, claim_attempt, find_resume_point, newer_run_started, start_record
from .sessions import SessionHistory, load_history
from .state import RunState, StepIndex
from .steps import StepRecorder

if TYPE_CHECKING:
    from ..actor import Actor
    from ..architectures.base import RunContext

__all__ = ["JournalRuntime", "ResumePoint", "UnknownToolPolicy", "current_idempotency_key"]

log = get_logger(__name__)


class JournalRuntime(StepRecorder):
    """A :class:`~jeeves_router.runtime.Runtime` that records and replays through a journal.

    Args:
        journal: Where entries go (:class:`SQLiteJournal`, :class:`MemoryJournal`, ...).
        strict: On resume, raise :class:`~jeeves_router.errors.ReplayDivergence` instead of
            calling live when a recorded step does not match (a keyed retry of a completed
            run always does: :mod:`.keyed`).
        on_unknown_tool_outcome: What resume does with a tool call (or a function
            capability's call) whose outcome is unknown: ``"fail"`` (default), ``"retry"``
            or ``"skip"`` (see module docs).
        record_events: Also record each run's event stream (for ``jeeves-router replay``).
        session_history: Give a root run called without ``history`` the earlier answered
            turns of its session, within these limits (see ``jeeves_router.journal.sessions``);
            ``None`` (default): a run sees only the history it is given.

    Attributes:
        flush_timeout_s: At most this long a run cut off between two steps waits to write its events.
        in_flight_s: A run requested with an idempotency key whose latest attempt another
            process started and never ended counts as in flight (a retry is refused) until the
            run has written nothing for this long; then a retry resumes it (:mod:`.keyed`).

    Example:
        A runtime records every run of the agents built with it (:class:`SQLiteJournal`
        keeps them across restarts; the in-memory journal here is for tests):

        >>> import anyio
        >>> from jeeves_router import Agent
        >>> from jeeves_router.journal import JournalRuntime, MemoryJournal
        >>> from jeeves_router.testing import ScriptedModel
        >>> runtime = JournalRuntime(MemoryJournal())
        >>> billing = Agent("You resolve payments.", name="billing", model=ScriptedModel(["Refund issued."]),
        ...                 runtime=runtime)
        >>> billing.run_sync("I was charged twice", session_id="s-42").status
        'ok'
        >>> [entry.record.type for entry in anyio.run(runtime.journal.read, "s-42") if entry.record.type != "event"]
        ['run.start', 'model', 'run.end']
    """

    flush_timeout_s: float = 5.0
    in_flight_s: float = 120.0
    honours_idempotency_keys = True

    def __init__(
        self,
        journal: Journal,
        *,
        strict: bool = False,
        on_unknown_tool_outcome: UnknownToolPolicy = "fail",
        record_events: bool = True,
        session_history: SessionHistory | None = None,
    ) -> None:
        if session_history is not None and not record_events:
            raise UsageError("session_history needs record_events=True: a turn's answer is read from its events")
        if on_unknown_tool_outcome not in ("fail", "retry", "skip"):
            raise UsageError(
                f"on_unknown_tool_outcome must be 'fail', 'retry' or 'skip', got {on_unknown_tool_outcome!r}"
            )
        self.journal = journal
        self.strict = strict
        self.on_unknown_tool_outcome: UnknownToolPolicy = on_unknown_tool_outcome
        self.record_events = record_events
        self.session_history = session_history
        self._runs: dict[str, RunState] = {}
        self._indexes: dict[tuple[str, str], StepIndex] = {}
        self._owner = uuid.uuid4().hex  # names the keyed attempts this runtime claims (:mod:`.keyed`)
        self._claiming: set[str] = set()  # keyed runs this runtime is claiming now

    def __repr__(self) -> str:
        return f"JournalRuntime({self.journal!r}, strict={self.strict})"

    async def observe_run(
        self, ctx: RunContext, run: Callable[[Actor, RunContext], AsyncIterator[Event]]
    ) -> AsyncIterator[Event]:
        """Run ``run(ctx.agent, ctx)`` as a journaled root run: record its start, events and end.

        Called by :class:`~jeeves_router.Agent` for root runs; sets ``ctx.run_id``.
        """
        cut_off = cut_requests_from_now()  # the requests a cancellation leaves unanswered (see _write_cut)
        if ctx.idempotency_key is not None and ctx.resume_run is None:
            state = await self._begin_keyed(ctx, ctx.idempotency_key)
        else:
            await self._load_history(ctx)
            state = await self._begin(ctx)
        adapter = event_adapter()
        ended = False
        try:
            async with aclosing(run(ctx.agent, ctx)) as stream:  # type: ignore[type-var]
                async for ev in stream:
                    if self.record_events:
                        rec = EventRecord(attempt=state.attempt, event=adapter.dump_python(ev, mode="json"))
                        state.pending.append(self._entry(state.session_id, state.run_id, rec))
                    yield ev
        except Exception as exc:
            ended = True
            await self._finish(
                state,
                RunEndRecord(
                    attempt=state.attempt,
                    status="failed",
                    error_type=type(exc).__name__,
                    message=shown_message(exc, expose_details=ctx.expose_details),
                ),
            )
            raise
        else:
            ended = True
            await self._finish(state, RunEndRecord(attempt=state.attempt, status="completed"))
        finally:
            try:
                if not ended:  # cut off (cancelled, or its stream closed early): keep what it produced
                    await self._write_cut(state, ctx.ledger.since(0, ctx.path) + cut_off())
            finally:
                self._forget(state.run_id)

    async def _begin(self, ctx: RunContext) -> RunState:
        sid = ctx.session_id
        start = start_record(ctx)
        # Only Agent.resume() replays: it names the recorded run to continue. Any other run
        # is a new request and runs live under a new run id, even when its prompt equals a
        # recorded one (the user may well ask for the same transfer twice).
        run_id, attempt, completed = ctx.resume_run, 1, None
        if run_id is None:
            run_id = uuid.uuid4().hex  # a new run: nothing to read, no one else can start it
            await self.journal.append([self._entry(sid, run_id, start)])
        else:  # another process may be resuming it at this very moment: claim the attempt
            attempt, completed = await claim_attempt(self.journal, sid, run_id, start)
        return await self._started(ctx, run_id, attempt, ctx.resume_run is None, completed)

    async def _load_history(self, ctx: RunContext) -> None:
        limits = self.session_history
        if limits is not None and not ctx.history and ctx.resume_run is None:
            ctx.history = await load_history(self.journal, ctx.session_id, ctx.agent.name, limits)

    async def _begin_keyed(self, ctx: RunContext, key: str) -> RunState:
        """Start the run ``key`` names, or take it up again (see :mod:`.keyed`)."""
        sid = ctx.session_id
        run_id = keyed_run_id(sid, key)
        requested = start_record(ctx).input_digest  # the request as sent, before the session's history

        async def new_start() -> RunStartRecord:
            await self._load_history(ctx)
            return start_record(ctx)

        busy = run_id in self._runs or run_id in self._claiming  # one execution of a run per runtime
        if not busy:
            self._claiming.add(run_id)
        try:
            won = await claim_keyed_run(
                self.journal,
                sid,
                run_id,
                requested,
                new_start,
                owner=self._owner,
                running_here=busy,
                in_flight_s=self.in_flight_s,
            )
        finally:
            if not busy:
                self._claiming.discard(run_id)
        if won.history is not None:  # a recorded run: its input as recorded (the rest is the request's own)
            ctx.history = won.history
        state = await self._started(ctx, run_id, won.attempt, won.attempt == 1, won.completed)
        state.strict = won.completed is not None  # its answer is given: a changed step must not run live
        return state

    async def _started(
        self, ctx: RunContext, run_id: str, attempt: int, fresh: bool, completed: int | None
    ) -> RunState:
        ctx.run_id = run_id
        ctx.replayed = completed is not None  # a completed attempt's steps answer this one
        # an older turn run again (a resume, a retried key) leaves the session's state to the newer turns
        ctx.superseded = not fresh and await newer_run_started(self.journal, ctx.session_id, run_id)
        state = RunState(ctx.session_id, run_id, attempt, fresh, completed_attempt=completed)
        self._runs[run_id] = state
        log.debug("journal run", session_id=ctx.session_id, run_id=run_id, attempt=attempt, replay=not fresh)
        return state

    async def _finish(self, state: RunState, end: RunEndRecord) -> None:
        await self.journal.append(self._flush(state, self._entry(state.session_id, state.run_id, end)))

    async def _write_cut(self, state: RunState, spent: Usage) -> None:
        """Write what a run cut off between two steps left pending, and a ``run.end`` ``cut`` (it stays resumable).

        The end records ``spent``: the run's requests (its ledger, as ``RunStream.spent``
        counts them) and those the cut left waiting for their answers, reported to the
        enclosing :func:`~jeeves_router.usage.cut_requests` scope (the HTTP server's, whose
        ``run cut`` log line says the same figure).

        The ``cut`` end tells a keyed retry in another process that this attempt runs no
        more, so it resumes the run at once (:mod:`.keyed`). Runs while the run is being
        cancelled or closed, so the write is shielded from the cancellation and bounded by
        :attr:`flush_timeout_s`; a write that fails or times out is logged, never raised
        (the run ends as it was ending).
        """
        end = RunEndRecord(attempt=state.attempt, status="cut", usage=asdict(spent))
        # with the requests the cut left waiting at their steps: the resume that makes them again counts them (.cuts)
        entries = self._flush(state, *state.cuts, self._entry(state.session_id, state.run_id, end))
        error = "timed out"
        with anyio.move_on_after(self.flush_timeout_s, shield=True):
            try:
                await self.journal.append(entries)
                return
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
        ids = {"session_id": state.session_id, "run_id": state.run_id, "attempt": state.attempt}
        log.warning("journal.cut_events_lost", **ids, entries=len(entries), error=error)

    def _forget(self, run_id: str) -> None:
        self._runs.pop(run_id, None)
        for key in [k for k in self._indexes if k[1] == run_id]:
            del self._indexes[key]

    async def resume_point(self, agent: Actor, session_id: str, run_id: str | None = None) -> ResumePoint:
        """The run :meth:`Agent.resume` should run: ``run_id``, else the last unfinished one, else the last one.

        Raises:
            UsageError: if the session has no recorded run (or none called ``run_id``), or
                it was recorded for another agent.
        """
        return await find_resume_point(self.journal, agent.name, session_id, run_id)
