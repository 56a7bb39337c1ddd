"""JournalRuntime: record every step of a run, replay recorded steps, resume after a crash.

How a run finds its record. ``agent.run()`` and ``agent.stream()`` always start a new run
(a new run id) and execute it live, whatever the journal holds: durability is explicit.
Only :meth:`Agent.resume` replays: it picks a recorded run of the session (the last
unfinished one, else the last one, or the ``run_id`` it is given) and runs it again under
that run id, with the recorded input, as a new attempt; two resumes at once each claim an
attempt of their own (:func:`.resume.claim_attempt`).

How a step finds its record. Each step is keyed by (session, run, step index) and the
digest of its input (for a model call: the model's name and the whole request). A
recorded step with the same digest is served from the journal — the model is not called,
its text chunks are re-yielded as they were streamed. A step with no record is performed
live and recorded; a step whose position holds a record with another digest is performed
live (or raises ``ReplayDivergence`` in strict mode).

Tool calls. Before a tool runs, a ``tool.started`` entry with the call's idempotency key
(:func:`current_idempotency_key`, stable across resumes) is written. A started call with
no recorded result and no recorded failure (a tool that raised is retried like any failed
step) had an unknown outcome (the process died during it); on resume,
``on_unknown_tool_outcome`` decides (``"fail"``, ``"retry"`` or ``"skip"``, see
:mod:`.idempotency`), as it does for the loser when two processes execute one run at once.

Failed attempts are recorded (``step.failed``); resuming a *completed* run raises them
again where they happened, so a run that ended on a failure replays to the same result
with no call (:mod:`.failures`) — where its time limit ended an attempt included.

Events are written with the run's next recorded step, or its ``run.end``. A run cut off
between two steps (cancelled, or its stream closed early) writes them as it is cut, with no
``run.end``: the journal keeps what its consumer saw and the run stays resumable. That write
is shielded from the cancellation and given up after ``flush_timeout_s`` (then, or if it
fails, it is logged). Not recorded: events buffered when the process dies (resume redoes them).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import aclosing
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import anyio
from pydantic import TypeAdapter

from .._log import get_logger
from ..errors import ReplayDivergence, UsageError
from ..events import Event, event_adapter
from ..models.base import Model, ModelRequest, ModelResponse, ModelStreamItem, ModelTextDelta
from ..runtime import LimitWhen, Runtime, StepKey
from ..usage import NO_USAGE
from .base import Journal
from .failures import PendingFailure, limit_digest, limit_record, replayed_error
from .idempotency import UnknownToolPolicy, current_idempotency_key, idempotency_scope, unknown_outcome, won_claim
from .records import (
    Entry,
    EventRecord,
    ModelRecord,
    Record,
    RunEndRecord,
    StepFailedRecord,
    StepRecord,
    ToolStartedRecord,
    digest,
)
from .resume import ResumePoint, claim_attempt, find_resume_point, start_record
from .sessions import SessionHistory, load_history
from .state import RunState, StepIndex
from .step_results import decode_result, encode_result

if TYPE_CHECKING:
    from ..actor import Actor
    from ..architectures.base import RunContext

__all__ = ["JournalRuntime", "ResumePoint", "UnknownToolPolicy", "current_idempotency_key"]

log = get_logger(__name__)
T = TypeVar("T")

_RESPONSE = TypeAdapter(ModelResponse)


class JournalRuntime(Runtime):
    """A :class:`~jeeves_router.runtime.Runtime` that records and replays through a journal.

    Args:
        journal: Where entries go (:class:`SQLiteJournal`, :class:`MemoryJournal`, ...).
        strict: On resume, raise :class:`~jeeves_router.errors.ReplayDivergence` instead of
            calling live when a recorded step does not match.
        on_unknown_tool_outcome: What resume does with a tool call whose outcome is
            unknown: ``"fail"`` (default), ``"retry"`` or ``"skip"`` (see module docs).
        record_events: Also record each run's event stream (for ``jeeves-router replay``).
        session_history: Give a root run called without ``history`` the earlier answered
            turns of its session, within these limits (see ``jeeves_router.journal.sessions``);
            ``None`` (default): a run sees only the history it is given.

    Attributes:
        flush_timeout_s: At most this long a run cut off between two steps waits to write its events.

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

    def __repr__(self) -> str:
        return f"JournalRuntime({self.journal!r}, strict={self.strict})"

    async def observe_run(
        self, ctx: RunContext, run: Callable[[Actor, RunContext], AsyncIterator[Event]]
    ) -> AsyncIterator[Event]:
        """Run ``run(ctx.agent, ctx)`` as a journaled root run: record its start, events and end.

        Called by :class:`~jeeves_router.Agent` for root runs; sets ``ctx.run_id``.
        """
        limits = self.session_history
        if limits is not None and not ctx.history and ctx.resume_run is None:
            ctx.history = await load_history(self.journal, ctx.session_id, ctx.agent.name, limits)
        state = await self._begin(ctx)
        adapter = event_adapter()
        try:
            async with aclosing(run(ctx.agent, ctx)) as stream:  # type: ignore[type-var]
                async for ev in stream:
                    if self.record_events:
                        rec = EventRecord(attempt=state.attempt, event=adapter.dump_python(ev, mode="json"))
                        state.pending.append(self._entry(state.session_id, state.run_id, rec))
                    yield ev
        except Exception as exc:
            await self._finish(
                state,
                RunEndRecord(attempt=state.attempt, status="failed", error_type=type(exc).__name__, message=str(exc)),
            )
            raise
        else:
            await self._finish(state, RunEndRecord(attempt=state.attempt, status="completed"))
        finally:
            try:
                if state.pending:  # cut off (cancelled, or its stream closed early): keep what it produced
                    await self._write_cut(state)
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
        ctx.run_id = run_id
        state = RunState(sid, run_id, attempt, ctx.resume_run is None, completed_attempt=completed)
        self._runs[run_id] = state
        log.debug("journal run", session_id=sid, run_id=run_id, attempt=attempt, replay=not state.fresh)
        return state

    async def _finish(self, state: RunState, end: RunEndRecord) -> None:
        await self.journal.append(self._flush(state, self._entry(state.session_id, state.run_id, end)))

    def _flush(self, state: RunState | None, *tail: Entry) -> list[Entry]:
        """``state``'s pending entries (a failure as its recovery has judged it by now), then ``tail``."""
        if state is None or not state.pending:
            return list(tail)
        pending, state.pending = state.pending, []
        return [*(p.entry() if isinstance(p, PendingFailure) else p for p in pending), *tail]

    async def _write_cut(self, state: RunState) -> None:
        """Write what a run cut off between two steps left pending, with no ``run.end`` (it stays resumable).

        Runs while the run is being cancelled or closed, so the write is shielded from the
        cancellation and bounded by :attr:`flush_timeout_s`; a write that fails or times
        out is logged, never raised (the run ends as it was ending).
        """
        entries = self._flush(state)
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

    def _entry(self, session_id: str, run_id: str, record: Record) -> Entry:
        return Entry(session_id=session_id, run_id=run_id, record=record)

    async def _index(self, key: StepKey) -> StepIndex:
        ik = (key.session_id, key.run_id)
        found = self._indexes.get(ik)
        if found is not None:
            return found
        index = StepIndex()
        state = self._runs.get(key.run_id)
        if state is None or not state.fresh:
            index.failed.attempt = state.completed_attempt if state is not None else None
            kinds = ("step", "model", "tool.started", "step.failed")
            for e in await self.journal.read(key.session_id, run_id=key.run_id, types=kinds):
                index.add(e.record)
        return self._indexes.setdefault(ik, index)

    async def _record(
        self, key: StepKey, index: StepIndex, rec: StepRecord | ModelRecord | ToolStartedRecord | StepFailedRecord
    ) -> None:
        await self.journal.append(self._flush(self._runs.get(key.run_id), self._entry(key.session_id, key.run_id, rec)))
        index.add(rec)

    def _diverged(self, key: StepKey, index: StepIndex, d: str) -> None:
        others = index.by_pos.get(key.index)
        if not others:
            return
        if self.strict:
            raise ReplayDivergence(
                f"strict replay: step {key.index} ({key.name}) of session {key.session_id!r}, run {key.run_id!r} "
                f"has input digest {d[:12]}, but the journal recorded {others[0][:12]}",
                metadata={"session_id": key.session_id, "run_id": key.run_id, "step": key.index},
            )
        log.info("journal step diverged; calling live", session_id=key.session_id, step=key.index, name=key.name)

    async def _failed(
        self,
        key: StepKey,
        index: StepIndex,
        d: str,
        exc: Exception,
        chunks: Sequence[str] = (),
        claim: str | None = None,
    ) -> None:
        """Keep a failed attempt of a step for the run's next write (see :mod:`.failures`); the caller re-raises."""
        if claim is not None:  # a tool call that raised: its outcome is known, a retry calls it again
            index.failed_claims.add(claim)
        failure = PendingFailure(key, d, self._attempt(key), exc, tuple(chunks), claim)
        state = self._runs.get(key.run_id)
        if state is not None:  # written with the next entry, once the recovery ladder has judged it
            state.pending.append(failure)
        else:
            await self.journal.append([failure.entry()])

    async def recorded_limit(self, key: StepKey, attempt: int) -> LimitWhen | Literal[""] | None:
        """Replaying a completed run: where its time limit ended the ladder's attempt ``attempt`` (:mod:`.failures`)."""
        index = await self._index(key)
        if index.failed.attempt is None:
            return None
        rec = index.failed.next(key.index, limit_digest(key.name, attempt))
        return rec.limit or "" if rec is not None else ""

    def record_limit(self, key: StepKey, attempt: int, when: LimitWhen) -> None:
        """Record that the run's time limit ended the ladder's attempt ``attempt`` (written with the next entry)."""
        state = self._runs.get(key.run_id)
        if state is not None:
            rec = limit_record(key, state.attempt, attempt, when)
            state.pending.append(self._entry(key.session_id, key.run_id, rec))

    def _attempt(self, key: StepKey) -> int:
        state = self._runs.get(key.run_id)
        return state.attempt if state is not None else 1

    async def step(self, key: StepKey, input: Any, fn: Callable[[], Awaitable[T]]) -> T:
        """Serve the step from the journal, or perform and record it."""
        d = digest({"name": key.name, "input": input})
        index = await self._index(key)
        failed = index.failed.next(key.index, d)  # attempts that failed before the recorded result
        if failed is not None:
            raise replayed_error(failed)
        rec = index.done.get((key.index, d))
        if isinstance(rec, StepRecord):
            result: T = decode_result(rec.result_type, rec.result)
            return result
        self._diverged(key, index, d)
        if key.name.startswith("tool:"):
            result = await self._tool(key, index, d, fn)
        else:
            try:
                result = await fn()
            except Exception as exc:
                await self._failed(key, index, d, exc)
                raise
        tag, data = encode_result(result)
        await self._record(
            key, index, StepRecord(name=key.name, index=key.index, digest=d, result_type=tag, result=data)
        )
        return result

    async def _tool(self, key: StepKey, index: StepIndex, d: str, fn: Callable[[], Awaitable[T]]) -> T:
        started = index.started.get((key.index, d))
        idem = started.idempotency_key if started else f"{key.session_id}:{key.run_id}:{key.index}:{d[:16]}"
        unknown = started is not None and started.claim not in index.failed_claims  # not known to have raised
        skipped = unknown_outcome(self.on_unknown_tool_outcome, key, idem) if unknown else None
        if skipped is not None:
            return skipped  # type: ignore[return-value]
        claim = uuid.uuid4().hex
        rec = ToolStartedRecord(
            name=key.name, index=key.index, digest=d, idempotency_key=idem, attempt=self._attempt(key), claim=claim
        )
        await self._record(key, index, rec)
        if not await won_claim(self.journal, key, d, claim, started):  # another process started it first
            skipped = unknown_outcome(self.on_unknown_tool_outcome, key, idem, elsewhere=True)
            if skipped is not None:
                return skipped  # type: ignore[return-value]
        with idempotency_scope(idem):
            try:
                return await fn()
            except Exception as exc:
                await self._failed(key, index, d, exc, claim=claim)
                raise

    async def model_stream(self, key: StepKey, model: Model, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        """Re-yield a recorded model call, or stream it live and record it."""
        d = digest({"model": model.name, "request": request})
        index = await self._index(key)
        failed = index.failed.next(key.index, d)  # attempts that failed before the recorded response
        if failed is not None:
            for chunk in failed.chunks:
                yield ModelTextDelta(chunk)
            raise replayed_error(failed)
        rec = index.done.get((key.index, d))
        if isinstance(rec, ModelRecord):
            for chunk in rec.chunks:
                yield ModelTextDelta(chunk)
            served: ModelResponse = _RESPONSE.validate_python(rec.response)
            if (key.index, d) in index.paid:  # a retry of this run asks again: its usage is counted already
                served = replace(served, usage=NO_USAGE)
            index.paid.add((key.index, d))
            yield served
            return
        self._diverged(key, index, d)
        chunks: list[str] = []
        response: ModelResponse | None = None
        async with aclosing(model.stream(request)) as stream:  # type: ignore[type-var]
            try:
                async for item in stream:
                    if isinstance(item, ModelTextDelta):
                        chunks.append(item.text)
                        yield item
                    else:
                        response = item
            except Exception as exc:
                await self._failed(key, index, d, exc, chunks)
                raise
        if response is None:
            return  # the caller reports a stream without a response
        data = _RESPONSE.dump_python(response, mode="json")
        index.paid.add((key.index, d))
        await self._record(
            key,
            index,
            ModelRecord(name=key.name, index=key.index, digest=d, model=model.name, chunks=chunks, response=data),
        )
        yield response
