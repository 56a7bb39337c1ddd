"""DBOS: a recovered workflow counts the failed attempt before a model call it replays, as the run did.

DBOS checkpoints each attempt of a model call as its own step, the failed one as its failure
with what it spent (a journal's ``step.failed`` record), so a run recovered after the call had
failed once and then been answered replays the failure (its usage counted again) before the
answer: the same usage as the run. Checked here with a fork from the step after the answer,
a recovery of a worker that died there.
"""

from __future__ import annotations

import pytest

from jeeves_router.testing import Call, ScriptedModel
from tests.test_dbos_sqlite import dbos_app  # noqa: F401  (fixture)

pytestmark = pytest.mark.anyio


async def test_a_workflow_forked_after_a_retried_call_counts_its_failed_attempt(dbos_app: str) -> None:  # noqa: F811
    from dbos import DBOS

    from jeeves_router import Agent, tool
    from jeeves_router.architectures.react import ToolLoop
    from jeeves_router.durable.dbos import DBOSRuntime, DurableAgents, _sqlite_timestamps_work, dbos_config
    from jeeves_router.errors import ModelError
    from jeeves_router.recovery import Recovery
    from jeeves_router.testing import DEFAULT_USAGE, FAILED_USAGE, RecordedSleeps

    if not _sqlite_timestamps_work():
        pytest.skip("DBOS cannot write a SQLite system database with this Python's SQLite")

    @tool(repeatable=True)
    def lookup(invoice: str) -> str:
        """Look an invoice up."""
        return f"{invoice}: paid twice"

    overloaded = ModelError("HTTP 503 overloaded", severity="retriable", status_code=503)
    model = ScriptedModel([overloaded, Call("lookup", {"invoice": "INV-7"}), "Paid twice.", "Paid twice."])
    agent = Agent(
        "Billing.",
        name="billing",
        model=model,
        tools=[lookup],
        architecture=ToolLoop(recovery=Recovery(sleep=RecordedSleeps())),
        runtime=DBOSRuntime(),
    )
    durable = DurableAgents([agent], workflow_name="jeeves_test.failed_attempt_usage")
    DBOS(config=dbos_config("jeeves-sqlite-test", dbos_app, executor_id="solo"))
    DBOS.launch()
    await durable.register_queue(polling_interval_sec=0.1)
    wid = await durable.enqueue("was INV-7 paid?", session_id="q1", workflow_id="wf-1")
    run = await durable.result(wid)
    assert run.usage == FAILED_USAGE + DEFAULT_USAGE + DEFAULT_USAGE
    steps = await DBOS.list_workflow_steps_async(wid)
    started = next(s["function_id"] for s in steps if s["function_name"] == "tool:lookup.started")
    forked = await DBOS.fork_workflow_async(wid, started)  # the steps before the tool call replayed
    recovered = await durable.result(forked.workflow_id)
    assert len(model.requests) == 4  # the answer asked again, not the failed call nor the lookup turn
    assert (recovered.status, recovered.usage, recovered.usage_by_route) == ("ok", run.usage, run.usage_by_route)
