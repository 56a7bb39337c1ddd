"""A recovered DBOS workflow stops where the run's time limit stopped it, with the same usage.

The wall clock is the one input of the recovery ladder a recovery does not reproduce, so the
run records where its limit ended an attempt through the runtime port (``record_limit``), as a
journal does, and a recovered workflow asks it (``recorded_limit``) instead of its own clock:
before an attempt (the step is not run), during one (the call the time box cut off is not
made again, and what it spent counts again) and after a failure (see ``test_dbos_judged``). A
fork from past the end of a workflow replays every step from its checkpoints, as a recovered
workflow replays the steps its dead worker completed; a fork from the limit's checkpoint is a
worker killed before it was written, whose recovery measures the limit from its own start.
SQLite system database, one process: no server needed.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from jeeves_router.models.base import ModelRequest
from jeeves_router.policies import RetryPolicy
from jeeves_router.recovery import Recovery
from jeeves_router.results import RunResult
from jeeves_router.testing import CUT_USAGE, FunctionModel, RecordedSleeps
from tests.recovery_clock import Clock
from tests.test_dbos_judged import (
    billing,
    decided,
    invoice_run,
    launch,
    reselecting_desk,
    step_names,
)
from tests.test_dbos_judged import replay as fork_past_the_end

LIMIT = 0.3  # real seconds a hung call waits before the run's limit cuts it


async def replay(durable: Any, workflow_id: str) -> RunResult:
    """The result of a fork of ``workflow_id`` from past its last step (every step from its checkpoint)."""
    result: RunResult = (await fork_past_the_end(durable, workflow_id))[1]
    return result


def stopped_by_the_limit(result: RunResult) -> None:
    assert result.status == "critical" and result.report is not None and result.report["reason"] == "time_limit"


@pytest.mark.anyio
async def test_a_workflow_stopped_before_a_step_stops_there_again_when_recovered(dbos_app: str, clock: Clock) -> None:
    durable, wid, run, model = await invoice_run(dbos_app, clock, "jeeves_test.limit_before", slow=True)
    stopped_by_the_limit(run)
    assert len(model.requests) == 1
    assert (await step_names(wid))[-1] == "limit:model.limit"  # written once, when the limit ended an attempt

    clock.skipped = 0.0  # the recovery is quick: its own clock would allow the call
    recovered = await replay(durable, wid)
    stopped_by_the_limit(recovered)
    assert len(model.requests) == 1  # the step the run never started is not started now
    assert (recovered.usage, decided(recovered.report)) == (run.usage, decided(run.report))


@pytest.mark.anyio
async def test_a_slow_recovery_does_not_stop_before_the_run_did(dbos_app: str, clock: Clock) -> None:
    """The run went on past its checkpointed attempts: the limit did not end them, whatever the new clock says."""
    durable, wid, run, model = await invoice_run(dbos_app, clock, "jeeves_test.limit_slow", slow=False)
    assert (run.status, run.output, len(model.requests)) == ("ok", "Paid.", 2)

    clock.skipped = 60.0  # the recovery's own clock is past the limit from its start
    recovered = await replay(durable, wid)
    assert (recovered.status, recovered.output, recovered.usage) == ("ok", "Paid.", run.usage)
    assert len(model.requests) == 2


@pytest.mark.anyio
async def test_a_call_the_time_box_cut_off_is_not_made_again_and_counts_again(dbos_app: str, clock: Clock) -> None:
    async def hang(request: ModelRequest) -> str:
        clock.release()  # the run's time passes from here on
        await anyio.sleep_forever()
        return "unreachable"

    model = FunctionModel(hang, name="hung")
    agent = billing(model, Recovery(time_limit_s=LIMIT, sleep=RecordedSleeps()))
    durable = await launch(agent, "jeeves_test.limit_during", dbos_app)
    clock.hold()
    wid = await durable.enqueue("is INV-7 paid?", session_id="q1", workflow_id="wf-1")
    run = await durable.result(wid)
    stopped_by_the_limit(run)
    assert len(model.requests) == 1 and run.usage == CUT_USAGE  # sent, never answered

    clock.hold()
    recovered = await replay(durable, wid)
    stopped_by_the_limit(recovered)
    assert len(model.requests) == 1  # not sent again
    assert recovered.usage.requests == run.usage.requests and recovered.usage == run.usage


@pytest.mark.anyio
async def test_a_retry_cut_off_is_replayed_between_the_checkpoints_around_it(dbos_app: str, clock: Clock) -> None:
    """The cut call left no checkpoint; its stop is checkpointed after it, a judgement before."""
    calls: list[str] = []

    async def answer(request: ModelRequest) -> Any:
        calls.append("model")
        if len(calls) == 1:
            raise TimeoutError("read timed out")  # retried: its judgement is checkpointed before the retry
        clock.release()
        await anyio.sleep_forever()

    model = FunctionModel(answer, name="flaky")
    at_once = RetryPolicy(initial_delay_s=0.0)  # a retry within the limit, whatever the clock reads
    agent = billing(model, Recovery(time_limit_s=LIMIT, retry_policy=at_once, sleep=RecordedSleeps()))
    durable = await launch(agent, "jeeves_test.limit_places", dbos_app)
    clock.hold()
    wid = await durable.enqueue("is INV-7 paid?", session_id="q1", workflow_id="wf-1")
    run = await durable.result(wid)
    stopped_by_the_limit(run)
    assert await step_names(wid) == ["model", "model.judged", "limit:model.limit"]  # the cut call: no checkpoint

    clock.hold()
    recovered = await replay(durable, wid)
    stopped_by_the_limit(recovered)
    assert len(calls) == 2 and (recovered.usage, decided(recovered.report)) == (run.usage, decided(run.report))


@pytest.mark.anyio
async def test_the_steps_after_a_replayed_cut_are_replayed_at_their_own_checkpoints(
    dbos_app: str, clock: Clock
) -> None:
    """A capability agent's limit cuts its call off; the orchestrator goes on (steps after the stop).

    The cut call drew a step id it never checkpointed and its stop is checkpointed after it; a
    recovered run that replays the cut draws neither, so it passes over both: every later step
    replays its own checkpoint (else one would run live, or DBOS would find another step there).
    """
    from jeeves_router import Agent
    from jeeves_router.architectures.capabilities.architecture import Capability, CapabilityCall
    from jeeves_router.architectures.react import ToolLoop
    from jeeves_router.recovery import ErrorClassification, ErrorSeverity

    async def hang(request: ModelRequest) -> str:
        clock.release()
        await anyio.sleep_forever()
        return "unreachable"

    hung = FunctionModel(hang, name="hung")
    slow = Agent("Billing.", name="a", model=hung, architecture=ToolLoop(recovery=Recovery(time_limit_s=LIMIT)))
    calls: list[str] = []

    async def b(call: CapabilityCall) -> str:
        calls.append("b")
        return "B"

    def elsewhere(exc: BaseException, ctx: Any) -> ErrorClassification:
        return ErrorClassification(ErrorSeverity.RECLASSIFICATION, "try another capability")

    caps = [Capability("a", slow, "a", classify_error=elsewhere), Capability("b", b, "b"), Capability("c", b, "c")]
    desk, brain = reselecting_desk(caps)
    durable = await launch(desk, "jeeves_test.limit_then_steps", dbos_app)
    clock.hold()
    wid = await durable.enqueue("refund INV-7", session_id="q1", workflow_id="wf-1")
    run = await durable.result(wid)
    assert (run.status, run.output, calls, len(hung.requests)) == ("ok", "B", ["b"], 1)
    names = await step_names(wid)
    stop = names.index("limit:model.limit")
    assert len(names) > stop + 2  # the orchestrator's steps follow the stop

    asked = len(brain.requests)
    clock.hold()
    recovered = await replay(durable, wid)
    assert (recovered.status, recovered.output) == ("ok", "B")
    assert len(hung.requests) == 1 and len(brain.requests) == asked and calls == ["b"]  # every step from its checkpoint
    assert recovered.usage == run.usage
