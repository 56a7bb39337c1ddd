"""An agent used as a tool under DBOS: a recovered workflow reports the same usage, the inner agent not run again.

The inner agent's usage travels with the tool step's outcome (``ToolOutcome.usage``,
checkpointed with it); the request a caller's time limit cut off inside the tool travels
with the limit's record (``record_limit``). A fork from past the end of a workflow replays
every step from its checkpoints, as a recovered workflow replays its dead worker's steps.
SQLite system database, one process: no server needed.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from jeeves_router import Agent, tool
from jeeves_router.architectures.react import ToolLoop
from jeeves_router.durable.dbos import DBOSRuntime
from jeeves_router.models.base import ModelRequest
from jeeves_router.recovery import Recovery
from jeeves_router.results import RunResult
from jeeves_router.testing import CUT_USAGE, DEFAULT_USAGE, Call, FunctionModel, RecordedSleeps, Reply, ScriptedModel
from jeeves_router.usage import Usage
from tests.recovery_clock import Clock
from tests.test_dbos_judged import launch
from tests.test_dbos_limits import LIMIT, replay, stopped_by_the_limit

INNER = Usage(input_tokens=100, output_tokens=40, requests=1, cost_usd=0.25)


def desk(billing: Agent, model: Any, recovery: Recovery) -> Agent:
    @tool
    async def ask_billing(question: str) -> RunResult:
        """Ask the billing specialist."""
        return await billing.run(question)

    arch = ToolLoop(recovery=recovery)
    return Agent("You help.", name="desk", model=model, tools=[ask_billing], architecture=arch, runtime=DBOSRuntime())


def asks_billing(*then: Any) -> ScriptedModel:
    return ScriptedModel([Call("ask_billing", {"question": "balance of ACME?"}, id="c1"), *then])


@pytest.mark.anyio
async def test_a_recovered_workflow_counts_the_inner_agent_without_running_it_again(dbos_app: str) -> None:
    inner = ScriptedModel([Reply("Balance: 0 EUR.", usage=INNER)])
    billing = Agent("You know the balances.", name="billing", model=inner)
    outer = asks_billing("ACME owes nothing.")
    durable = await launch(desk(billing, outer, Recovery(sleep=RecordedSleeps())), "jeeves_test.seams_tool", dbos_app)
    wid = await durable.enqueue("Does ACME owe us?", session_id="q1", workflow_id="wf-1")
    run = await durable.result(wid)
    assert (run.status, run.output) == ("ok", "ACME owes nothing.")
    assert run.usage == DEFAULT_USAGE + INNER + DEFAULT_USAGE

    recovered = await replay(durable, wid)
    assert (recovered.output, recovered.usage) == (run.output, run.usage)
    assert len(inner.requests) == 1 and len(outer.requests) == 2  # every step from its checkpoint


@pytest.mark.anyio
async def test_a_recovered_workflow_whose_inner_agent_was_cut_reports_the_same_usage(
    dbos_app: str, clock: Clock
) -> None:
    async def hang(request: ModelRequest) -> str:
        clock.release()  # the caller's time passes from here on
        await anyio.sleep_forever()
        return "unreachable"

    inner = FunctionModel(hang, name="hung")
    billing = Agent("You know the balances.", name="billing", model=inner)
    outer = asks_billing("never asked")
    recovery = Recovery(time_limit_s=LIMIT, sleep=RecordedSleeps())
    durable = await launch(desk(billing, outer, recovery), "jeeves_test.seams_cut", dbos_app)
    clock.hold()
    wid = await durable.enqueue("Does ACME owe us?", session_id="q1", workflow_id="wf-1")
    run = await durable.result(wid)
    stopped_by_the_limit(run)
    assert run.usage == DEFAULT_USAGE + CUT_USAGE  # the caller's turn, the inner request the limit cut off

    clock.hold()
    recovered = await replay(durable, wid)
    stopped_by_the_limit(recovered)
    assert recovered.usage == run.usage
    assert len(inner.requests) == 1 and len(outer.requests) == 1  # neither model asked again
