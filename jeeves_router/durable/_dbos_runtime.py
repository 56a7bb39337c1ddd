"""DBOSRuntime: each step of a run as a DBOS step (see :mod:`jeeves_router.durable.dbos`).

Model calls, classifications and other steps are one DBOS step each; a tool call (or a function
capability's call) is two, a start mark and the call (an unknown outcome on recovery:
``on_unknown_tool_outcome``); a step that failed is checkpointed as the journal's
``step.failed`` record and raised again from it on recovery, with the recovery ladders'
judgement of it, which the next step (or the end of the run) checkpoints as ``<name>.judged``
(:mod:`._dbos_judged`). Where the run's time limit stopped it is checkpointed the same way, as
``<limit key>.limit``, and a recovered run answers the ladder's ``recorded_limit`` from those
checkpoints (:mod:`._dbos_limits`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping, Sequence
from contextlib import aclosing
from typing import TYPE_CHECKING, Any, TypeVar

from dbos import DBOS
from pydantic import TypeAdapter

from ..errors import ReplayDivergence, UsageError
from ..journal.failures import failure_record
from ..journal.idempotency import UnknownToolPolicy, unknown_outcome
from ..journal.records import StepFailedRecord, digest
from ..journal.step_results import decode_result, encode_result
from ..models.base import Model, ModelRequest, ModelResponse, ModelStreamItem, ModelTextDelta
from ..runtime import LimitWhen, RecordedLimit, Runtime, StepKey, idempotency_scope, is_call
from ..usage import Usage
from ._dbos_judged import Judgements
from ._dbos_limits import RecordedLimits
from ._dbos_turns import root_workflow, superseded

if TYPE_CHECKING:
    from ..actor import Actor
    from ..architectures.base import RunContext
    from ..events import Event

__all__ = ["DBOSRuntime"]

T = TypeVar("T")
_RESPONSE = TypeAdapter(ModelResponse)


class DBOSRuntime(Runtime):
    """Runs each step of a run as a DBOS step of the enclosing workflow.

    Outside a DBOS workflow the steps run directly (nothing is checkpointed), so the
    same agent also works in plain ``agent.run`` calls.

    Args:
        on_unknown_tool_outcome: What a recovered run does with a tool call that an earlier
            execution started and never checkpointed (its worker died during the call, so the
            call may have run): ``"fail"`` (default: raise
            :class:`~jeeves_router.errors.ToolOutcomeUnknown`), ``"retry"`` (call it again with
            the same idempotency key) or ``"skip"`` (tell the model the outcome is unknown), as
            ``JournalRuntime``'s option of that name.
    """

    def without_journal(self, attach: str = "") -> str:
        """What DBOS offers instead of a journal's keys and resume (a journal is no answer: ``attach`` unused)."""
        return (
            "DBOSRuntime keys a run by its DBOS workflow id, not by a client's key or a session: enqueue it with "
            "enqueue_run(client, ..., workflow_id=key) or DurableAgents.enqueue(..., workflow_id=key) (one id is "
            "one run), and DBOS recovers an unfinished workflow itself (start a worker with the executor_id of the "
            "one that died, or call DBOS.resume_workflow)"
        )

    def __init__(self, *, on_unknown_tool_outcome: UnknownToolPolicy = "fail") -> None:
        if on_unknown_tool_outcome not in ("fail", "retry", "skip"):
            raise UsageError(
                f"on_unknown_tool_outcome must be 'fail', 'retry' or 'skip', got {on_unknown_tool_outcome!r}"
            )
        self.on_unknown_tool_outcome: UnknownToolPolicy = on_unknown_tool_outcome
        self._limits = RecordedLimits()
        self._judgements = Judgements(self._limits.draw)

    def __repr__(self) -> str:
        return f"DBOSRuntime(on_unknown_tool_outcome={self.on_unknown_tool_outcome!r})"

    async def step(self, key: StepKey, input: Any, fn: Callable[[], Awaitable[T]], *, repeatable: bool = False) -> T:
        """Perform ``fn`` as a checkpointed DBOS step (a call, :func:`is_call`, after a checkpointed start mark).

        ``repeatable``: see :meth:`Runtime.step`.
        """
        workflow_id = DBOS.workflow_id
        if workflow_id is None:
            return await fn()
        d = digest({"name": key.name, "input": input})
        unknown = is_call(key) and not await self._mark_started(key, d)  # a tool's or function capability's call

        raised: list[Exception] = []  # this execution's own exception, raised as it is

        async def perform() -> dict[str, Any]:
            # Reached only when the call has no checkpoint: after a start marked by an earlier
            # execution, that execution died during the call, which may have run.
            try:
                idem = await _idempotency_key(workflow_id, key, d)
                skipped = (
                    unknown_outcome(self.on_unknown_tool_outcome, key, idem, repeatable=repeatable) if unknown else None
                )
                if skipped is not None:
                    result: Any = skipped
                else:
                    with idempotency_scope(idem):
                        result = await fn()
            except Exception as exc:
                return _failed(key, d, exc, raised)
            tag, data = encode_result(result)
            return {"digest": d, "type": tag, "data": data}

        out = await self._run(key.name, perform)
        self._check(key, d, out)
        await self._raise_failed(key, d, out, raised)
        value: T = decode_result(out["type"], out["data"])
        return value

    async def model_stream(self, key: StepKey, model: Model, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        """Perform one model call as a DBOS step, then yield its chunks and response."""
        if DBOS.workflow_id is None:
            async with aclosing(model.stream(request)) as live:  # type: ignore[type-var]
                async for item in live:
                    yield item
            return
        d = digest({"model": model.name, "request": request})

        raised: list[Exception] = []

        async def perform() -> dict[str, Any]:
            chunks: list[str] = []
            response: ModelResponse | None = None
            async with aclosing(model.stream(request)) as stream:  # type: ignore[type-var]
                try:
                    async for item in stream:
                        if isinstance(item, ModelTextDelta):
                            chunks.append(item.text)
                        else:
                            response = item
                except Exception as exc:  # its text never reached the consumer: the ladder may retry it
                    return _failed(key, d, exc, raised, chunks)
            data = None if response is None else _RESPONSE.dump_python(response, mode="json")
            return {"digest": d, "chunks": chunks, "response": data}

        out = await self._run(key.name, perform)
        self._check(key, d, out)
        await self._raise_failed(key, d, out, raised)
        for chunk in out["chunks"]:
            yield ModelTextDelta(chunk)
        if out["response"] is not None:
            yield _RESPONSE.validate_python(out["response"])

    async def recorded_limit(self, key: StepKey, attempt: int) -> RecordedLimit | None:
        """In a DBOS workflow: where the run's time limit ended this attempt, from the workflow's checkpoints.

        ``None`` (read the clock) when they hold no stop of this attempt (see :mod:`._dbos_limits`).
        """
        return await self._limits.answer(key, attempt)

    def record_limit(self, key: StepKey, attempt: int, when: LimitWhen, spent: Usage | None = None) -> None:
        """Note that the run's time limit ended this attempt; checkpointed with the workflow's next step or its end."""
        note = self._limits.note(key, attempt, when, spent)
        if note is not None:
            self._judgements.hold(note)

    async def observe_run(
        self, ctx: RunContext, run: Callable[[Actor, RunContext], AsyncIterator[Event]]
    ) -> AsyncIterator[Event]:
        """Run a root run; in a DBOS workflow, then checkpoint what waits (a judgement, a limit stop).

        In a workflow the run is marked superseded when it is an older turn of its session run
        again after a newer one (a fork, a recovery: :mod:`._dbos_turns`), as a journal marks it.
        """
        if DBOS.workflow_id is None:
            async with aclosing(run(ctx.agent, ctx)) as events:  # type: ignore[type-var]
                async for ev in events:
                    yield ev
            return
        # an older turn run again (a fork, a recovery) leaves the session's state to the newer turns
        ctx.superseded = await superseded(ctx.session_id)
        try:
            try:
                async with aclosing(run(ctx.agent, ctx)) as events:  # type: ignore[type-var]
                    async for ev in events:
                        yield ev
            except Exception:
                await self._judgements.checkpoint()
                raise
            except BaseException:  # cancelled, or its stream closed early: no step may run now
                self._judgements.forget()
                raise
            await self._judgements.checkpoint()
        finally:
            self._limits.forget()

    async def _run(self, name: str, perform: Callable[[], Coroutine[Any, Any, dict[str, Any]]]) -> dict[str, Any]:
        """Run the DBOS step ``name``, after checkpointing what waits (judgements of failures before it, limit stops).

        Their ids and this step's are drawn before anything is awaited, so a step that another
        task of the workflow starts meanwhile comes after them, in a replay as in the run.
        """
        judged = self._judgements.reserve()
        at = self._limits.draw()
        if judged:
            await self._judgements.write(judged)
        out: dict[str, Any] = await at.run_async({"name": name}, perform)
        return out

    async def _raise_failed(self, key: StepKey, d: str, out: Mapping[str, Any], raised: list[Exception]) -> None:
        """Raise the failure ``out`` checkpoints: this execution's own exception, else the one rebuilt from its record.

        This execution's own waits for its judgement to be checkpointed; one rebuilt from its
        record comes with the judgement the run checkpointed (:mod:`._dbos_judged`).
        """
        failed = out.get("failed")
        if failed is None:
            return
        rec = StepFailedRecord.model_validate(failed)
        if raised:
            self._judgements.wait(key, d, raised[0], rec.chunks)
            raise raised[0]
        raise await self._judgements.replayed(key, d, rec)

    async def _mark_started(self, key: StepKey, d: str) -> bool:
        """Checkpoint that a tool call starts; whether this execution made the mark (not an earlier one).

        The mark's step is performed once per workflow: a recovered run gets the checkpoint back
        without performing it. Of two executions of one workflow at once, the one whose mark DBOS
        does not record stops there, before the call.
        """
        made = False

        async def mark() -> dict[str, Any]:
            nonlocal made
            made = True
            return {"digest": d}

        out = await self._run(f"{key.name}.started", mark)
        self._check(key, d, out)
        return made

    @staticmethod
    def _check(key: StepKey, d: str, out: Mapping[str, Any]) -> None:
        if out.get("digest") != d:
            raise ReplayDivergence(
                f"workflow {DBOS.workflow_id}: step {key.index} ({key.name}) of session {key.session_id!r} was "
                "checkpointed with another input; workflow code must be deterministic",
                metadata={"workflow_id": DBOS.workflow_id, "step": key.index},
            )


async def _idempotency_key(workflow_id: str, key: StepKey, d: str) -> str:
    """The idempotency key of step ``key`` (input digest ``d``) of a workflow: the same in every fork of it.

    A fork (``DBOS.fork_workflow``) is the run again from one of its steps, under a new workflow
    id: a tool call it makes again with the same input is the same call, so it is keyed by the
    workflow the forks come from, the step's position and its input, as a journal keys a call
    by its run, position and input.
    """
    root = await root_workflow(workflow_id)
    return f"dbos:{root}:{key.session_id}:{key.index}:{d[:16]}"


def _failed(
    key: StepKey, d: str, exc: Exception, raised: list[Exception], chunks: Sequence[str] = ()
) -> dict[str, Any]:
    """A step's failure as its checkpoint: a journal's ``step.failed`` record (type, severity, status...).

    DBOS would keep a raised exception as a bare ``PortableWorkflowError``, so a recovered run's
    recovery ladder would judge another error than the run's. The exception itself is kept in
    ``raised`` for this execution to raise.
    """
    raised.append(exc)
    rec = failure_record(key.name, key.index, d, 1, exc, chunks)
    return {"digest": d, "failed": rec.model_dump(mode="json")}
