"""How :class:`~jeeves_router.journal.JournalRuntime` records and replays the steps of a run.

Each step is keyed by (session, run, step index) and the digest of its input (for a model
call: the model's name and the whole request); see :mod:`.runtime` for the rules. This is
the step half of the runtime (model calls, tool calls, other steps, failed attempts, time
limits); the run half (a root run's start, end, cut-off and resume) is in :mod:`.runtime`.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import aclosing
from dataclasses import is_dataclass, replace
from typing import Any, TypeVar

from pydantic import TypeAdapter

from .._log import get_logger
from ..errors import ReplayDivergence, ToolOutcomeUnknown
from ..models.base import Model, ModelRequest, ModelResponse, ModelStreamItem, ModelTextDelta
from ..runtime import LimitWhen, RecordedLimit, Runtime, StepKey, is_call
from ..usage import NO_USAGE, Usage, cut_requests_from_now, cut_requests_into, spent_when_cut
from .base import Journal
from .cuts import cut_record, with_carried
from .failures import PendingFailure, limit_digest, limit_record, replayed_error
from .idempotency import UnknownToolPolicy, idempotency_scope, unknown_outcome, won_claim
from .records import Entry, ModelRecord, Record, StepFailedRecord, StepRecord, ToolStartedRecord, digest
from .state import RunState, StepIndex
from .step_results import decode_result, encode_result

__all__ = ["StepRecorder"]

log = get_logger("jeeves_router.journal.runtime")
T = TypeVar("T")

_RESPONSE = TypeAdapter(ModelResponse)
_NO_LIMIT = RecordedLimit("")  # the recorded run's limit did not end this attempt


def _unpaid(index: StepIndex, position: int, d: str, result: T) -> T:
    """A recorded call's outcome served again: its usage (an agent the tool ran) counts once per execution.

    A replay (a resume) counts it, as it counts the recorded model turns; a retry of this run
    that asks the same step again (a ``repeatable`` tool, which the ledger does not answer)
    gets it without usage, as a model call served twice does. The same for the usage a
    function capability reported (its :class:`CapabilityOutput`, a dataclass with ``usage``).
    """
    used = getattr(result, "usage", NO_USAGE)
    if is_dataclass(result) and isinstance(used, Usage) and used != NO_USAGE:
        if (position, d) in index.paid:
            return replace(result, usage=NO_USAGE)  # type: ignore[return-value,type-var]
        index.paid.add((position, d))
    return result


class StepRecorder(Runtime):
    """The steps of journaled runs: serve each from the journal, or perform and record it.

    The base of :class:`~jeeves_router.journal.JournalRuntime`, which sets the attributes.
    """

    journal: Journal
    strict: bool
    on_unknown_tool_outcome: UnknownToolPolicy
    _runs: dict[str, RunState]
    _indexes: dict[tuple[str, str], StepIndex]

    def _entry(self, session_id: str, run_id: str, record: Record) -> Entry:
        return Entry(session_id=session_id, run_id=run_id, record=record)

    def _flush(self, state: RunState | None, *tail: Entry) -> list[Entry]:
        """``state``'s pending entries (a failure as its recovery has judged it by now), then ``tail``."""
        if state is None or not state.pending:
            return list(tail)
        pending, state.pending = state.pending, []
        return [*(p.entry() if isinstance(p, PendingFailure) else p for p in pending), *tail]

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
        state = self._runs.get(key.run_id)
        keyed = state is not None and state.strict
        if self.strict or keyed:
            advice = (
                "; the run of this idempotency key completed with an agent that has changed since (its "
                "instructions, tools or model), so it cannot be replayed and nothing was run again: send the "
                "request with a new key to run it"
                if keyed
                else ""
            )
            raise ReplayDivergence(
                f"strict replay: step {key.index} ({key.name}) of session {key.session_id!r}, run {key.run_id!r} "
                f"has input digest {d[:12]}, but the journal recorded {others[0][:12]}{advice}",
                # the run's own session (a keyed refusal is logged by it), and the step's (a specialist's)
                metadata={
                    "session_id": state.session_id if state is not None else key.session_id,
                    "run_id": key.run_id,
                    "step": key.index,
                    "step_session_id": key.session_id,
                },
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

    async def recorded_limit(self, key: StepKey, attempt: int) -> RecordedLimit | None:
        """Replaying a completed run: where its time limit ended the ladder's attempt ``attempt`` (:mod:`.failures`)."""
        index = await self._index(key)
        if index.failed.attempt is None:
            return None
        rec = self._again(key, index.failed.next(key.index, limit_digest(key.name, attempt)))
        if rec is None or rec.limit is None:
            return _NO_LIMIT
        return RecordedLimit(rec.limit, Usage(**rec.spent_usage) if rec.spent_usage is not None else None)

    def _again(self, key: StepKey, rec: StepFailedRecord | None) -> StepFailedRecord | None:
        """``rec``, a completed attempt's failure that this replay raises again, also kept as this attempt's.

        The copy is written with the replay's next entry, so the replay's own attempt, once it
        completes, holds every failure it went through: a later replay (or resume) reads the
        last completed attempt, and without them it would run those steps live again.
        """
        state = self._runs.get(key.run_id)
        if rec is not None and state is not None and rec.attempt != state.attempt:
            copy = rec.model_copy(update={"attempt": state.attempt})
            state.pending.append(self._entry(key.session_id, key.run_id, copy))
        return rec

    def _cut(self, key: StepKey, d: str, spent: Usage) -> None:
        """Note what a cut left waiting at this step, for the run's ``cut`` end to write (:mod:`.cuts`)."""
        state = self._runs.get(key.run_id)
        if state is not None and spent != NO_USAGE:
            state.cuts.append(self._entry(key.session_id, key.run_id, cut_record(key, d, state.attempt, spent)))

    def record_limit(self, key: StepKey, attempt: int, when: LimitWhen, spent: Usage | None = None) -> None:
        """Record that the run's time limit ended the ladder's attempt ``attempt`` (written with the next entry)."""
        state = self._runs.get(key.run_id)
        if state is not None:
            rec = limit_record(key, state.attempt, attempt, when, spent)
            state.pending.append(self._entry(key.session_id, key.run_id, rec))

    def _attempt(self, key: StepKey) -> int:
        state = self._runs.get(key.run_id)
        return state.attempt if state is not None else 1

    async def step(self, key: StepKey, input: Any, fn: Callable[[], Awaitable[T]], *, repeatable: bool = False) -> T:
        """Serve the step from the journal, or perform and record it (``repeatable``: see :meth:`Runtime.step`)."""
        d = digest({"name": key.name, "input": input})
        index = await self._index(key)
        failed = self._again(key, index.failed.next(key.index, d))  # attempts that failed before the result
        if failed is not None:
            raise replayed_error(failed)
        rec = index.done.get((key.index, d))
        tool = is_call(key)  # a tool's call or a function capability's: marked started, then performed
        if isinstance(rec, StepRecord):
            result: T = decode_result(rec.result_type, rec.result)
            if tool:
                return _unpaid(index, key.index, d, result)
            return with_carried(result, index.failed_before((key.index, d), rec.attempt))  # its failed attempts'
        self._diverged(key, index, d)
        if tool:
            result = await self._tool(key, index, d, fn, repeatable)
            index.paid.add((key.index, d))  # its outcome's usage (an agent it ran) is counted by this execution
        else:
            carried = index.cut.pop((key.index, d), None)  # what an earlier attempt's cut left waiting here
            cut: list[Usage] = []
            try:
                try:
                    with cut_requests_into(cut):  # this step's own (concurrent selections each have theirs)
                        result = with_carried(await fn(), carried)
                finally:
                    for used in cut:  # and the enclosing scope's owner counts them, as without this one
                        spent_when_cut(used)
            except Exception as exc:
                await self._failed(key, index, d, with_carried(exc, carried))
                raise
            except BaseException:  # cut off: cancelled
                self._cut(key, d, sum(cut, NO_USAGE))
                raise
        tag, data = encode_result(result)
        await self._record(
            key,
            index,
            StepRecord(
                name=key.name, index=key.index, digest=d, result_type=tag, result=data, attempt=self._attempt(key)
            ),
        )
        return result

    async def _tool(
        self, key: StepKey, index: StepIndex, d: str, fn: Callable[[], Awaitable[T]], repeatable: bool
    ) -> T:
        started = index.started.get((key.index, d))
        idem = started.idempotency_key if started else f"{key.session_id}:{key.run_id}:{key.index}:{d[:16]}"
        unknown = started is not None and started.claim not in index.failed_claims  # not known to have raised
        skipped = unknown_outcome(self.on_unknown_tool_outcome, key, idem, repeatable=repeatable) if unknown else None
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
            except ToolOutcomeUnknown as exc:  # it may have run: no claim, so its start stays unknown
                await self._failed(key, index, d, exc)
                raise
            except Exception as exc:  # it raised: its outcome is known, a retry or a resume calls it again
                await self._failed(key, index, d, exc, claim=claim)
                raise

    async def model_stream(self, key: StepKey, model: Model, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        """Re-yield a recorded model call, or stream it live and record it."""
        d = digest({"model": model.name, "request": request})
        index = await self._index(key)
        failed = self._again(key, index.failed.next(key.index, d))  # attempts that failed before the response
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
            else:  # with what the attempts that failed before it spent (.cuts)
                served = with_carried(served, index.failed_before((key.index, d), rec.attempt))
            index.paid.add((key.index, d))
            yield served
            return
        self._diverged(key, index, d)
        carried = index.cut.pop((key.index, d), None)  # what an earlier attempt's cut left waiting here
        cut_off = cut_requests_from_now()  # sequential: no other request reports to the scope meanwhile
        chunks: list[str] = []
        response: ModelResponse | None = None
        try:
            async with aclosing(model.stream(request)) as stream:  # type: ignore[type-var]
                try:
                    async for item in stream:
                        if isinstance(item, ModelTextDelta):
                            chunks.append(item.text)
                            yield item
                        else:
                            response = item
                except Exception as exc:
                    await self._failed(key, index, d, with_carried(exc, carried), chunks)
                    raise
        except BaseException as exc:
            if not isinstance(exc, Exception):  # cut off: cancelled, or closed by its consumer
                self._cut(key, d, cut_off())
            raise
        if response is None:
            return  # the caller reports a stream without a response
        response = with_carried(response, carried)
        data = _RESPONSE.dump_python(response, mode="json")
        index.paid.add((key.index, d))
        await self._record(
            key,
            index,
            ModelRecord(
                name=key.name,
                index=key.index,
                digest=d,
                model=model.name,
                chunks=chunks,
                response=data,
                attempt=self._attempt(key),
            ),
        )
        yield response
