"""A call whose outcome is unknown and that ``on_unknown_tool_outcome="skip"`` did not make again counts as made.

A run cut (a crash, a cancel) during a refund call leaves the refund's outcome unknown: it may
have gone through. ``resume()`` under ``"skip"`` does not call it again and tells the model so.
But the attempt ledger kept no trace of the skipped call (an error result, as a failed call's,
is not kept), so the rest of the run decided as if no refund had been made: a capability
step that failed after it with REPLANNING was replanned (the ladder stops a step with
completed effects, ``effects_done``) and the new plan refunded again; a repeat of the
step in a later plan was run again rather than answered by it. Now the skipped call is
kept in the ledger as a call that completed, answered by its "unknown" outcome: the step
stops with ``effects_done`` and a repeat is answered, so the refund is never made twice.
The same under ``DBOSRuntime``: a fork of the workflow from the refund's call skips it alike.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from jeeves_router import Agent, tool
from jeeves_router.architectures.capabilities.architecture import Capabilities, Capability
from jeeves_router.errors import ModelError
from jeeves_router.journal import JournalRuntime
from jeeves_router.journal.base import Journal
from jeeves_router.ledger import Ledger, LedgerAnswer, SkippedCall
from jeeves_router.models.base import ModelRequest
from jeeves_router.recovery import Recovery
from jeeves_router.runtime import Runtime
from jeeves_router.testing import Call, FunctionModel, RecordedSleeps, Reply
from jeeves_router.tools import ToolOutcome
from tests.task_helpers import pending_tasks, settled_tasks, warnings_of_this_test
from tests.test_capabilities import Brain, plan
from tests.test_journal_surrogates import journals  # noqa: F401  (fixture)
from tests.test_seams_lifecycle import cancelled_once

pytestmark = pytest.mark.anyio

UNKNOWN = "the outcome of this refund call is unknown (interrupted); it was not repeated"


class Refunds:
    """The refund tool's effects; with ``stall`` its first call is cut mid-way (after the refund went out)."""

    def __init__(self, *, stall: bool = True) -> None:
        self.made: list[str] = []
        self.reached = anyio.Event()
        self.stall = stall


def desk(refunds: Refunds, runtime: Runtime, *, fails: int = 1) -> Agent:
    """A Capabilities desk whose ``pay`` agent refunds INV-7, then its model fails with REPLANNING ``fails`` times.

    The orchestrator's plans: ``pay`` (a replan plans ``pay`` again).
    """

    @tool
    async def refund(invoice: str) -> str:
        """Refund an invoice."""
        refunds.made.append(invoice)
        if refunds.stall and len(refunds.made) == 1:
            refunds.reached.set()
            await anyio.sleep(30)  # cut here: the refund went out, its answer never came back
        return f"refunded {invoice}"

    failures = [ModelError("lost", severity="replanning") for _ in range(fails)]

    def answer(request: ModelRequest) -> Reply | str:
        if request.messages[-1].role != "tool":
            return Reply(calls=[Call("refund", {"invoice": "INV-7"})])
        if failures:
            raise failures.pop()
        return "Refund done."

    pay = Agent("Payments.", name="pay", model=FunctionModel(answer, name="pay"), tools=[refund])
    brain = Brain(yes={"pay"}, plans=[plan("pay")])
    arch = Capabilities([Capability("pay", pay, "payments")], recovery=Recovery(sleep=RecordedSleeps()))
    return Agent("Orchestrator", name="desk", model=brain.model, architecture=arch, runtime=runtime)


async def cut_mid_refund(journal: Journal, refunds: Refunds) -> None:
    agent = desk(refunds, JournalRuntime(journal))
    before = await settled_tasks()
    with warnings_of_this_test("error"):
        scope = await cancelled_once(refunds.reached, lambda: agent.run("refund INV-7", session_id="s"))
        gc.collect()
    assert scope.cancelled_caught and pending_tasks() <= before
    assert refunds.made == ["INV-7"]


async def test_a_step_that_fails_after_a_skipped_refund_is_not_replanned_into_a_second_refund(
    journals: Callable[[], Journal],  # noqa: F811
) -> None:
    refunds = Refunds()
    await cut_mid_refund(journals(), refunds)
    journal = journals()
    res = await desk(refunds, JournalRuntime(journal, on_unknown_tool_outcome="skip")).resume("s")
    assert refunds.made == ["INV-7"]  # not refunded a second time by a new plan
    assert res.status == "critical" and res.report is not None and res.report["reason"] == "effects_done"
    told = [e.record.event for e in await journal.read("s", types=("event",)) if e.record.attempt == 2]  # type: ignore[union-attr]
    assert [(e["content"], e["is_error"]) for e in told if e["kind"] == "tool.result"] == [(UNKNOWN, True)]
    assert not [e for e in told if e["kind"] == "recovery.replan"]


def test_the_ledger_keeps_a_skipped_call_and_answers_a_retrys_same_call_with_it() -> None:
    """The skipped call counts as a call with effects and answers a retry's same call; a failed call does neither."""

    class Refund:
        name, repeatable = "refund", False

    ledger = Ledger()
    ledger.complete_call("s", 1, Refund(), {"invoice": "INV-7"}, SkippedCall(UNKNOWN, is_error=True))
    ledger.complete_call("s", 2, Refund(), {"invoice": "INV-8"}, ToolOutcome("refund failed", is_error=True))
    assert ledger.calls == 1  # the skipped call may have refunded; the failed one did not
    answer = ledger.completed_call("s", 0, Refund(), {"invoice": "INV-7"})  # a retry rewound to step 0
    assert isinstance(answer, LedgerAnswer) and (answer.content, answer.is_error) == (UNKNOWN, True)
    assert ledger.completed_call("s", 1, Refund(), {"invoice": "INV-8"}) is None  # a failed call runs again


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # DBOS runs on asyncio
async def test_a_forked_workflow_that_fails_after_a_skipped_refund_is_not_replanned_into_a_second_refund(
    tmp_path: Path,
) -> None:
    """DBOS alike: a fork from the refund's call (a worker killed mid-call) skips it, then stops with effects_done."""
    from dbos import DBOS

    from jeeves_router.durable.dbos import DBOSRuntime, DurableAgents, _sqlite_timestamps_work, dbos_config

    if not _sqlite_timestamps_work():
        pytest.skip("DBOS cannot write a SQLite system database with this Python's SQLite")
    refunds = Refunds(stall=False)
    agent = desk(refunds, DBOSRuntime(on_unknown_tool_outcome="skip"), fails=2)  # the run's, then the fork's
    durable = DurableAgents([agent], workflow_name="jeeves_test.skipped_call_replan")
    DBOS(config=dbos_config("jeeves-sqlite-test", f"sqlite:///{tmp_path / 'dbos.sqlite'}", executor_id="solo"))
    try:
        DBOS.launch()
        await durable.register_queue(polling_interval_sec=0.1)
        wid = await durable.enqueue("refund INV-7", session_id="s", workflow_id="wf-1")
        first = await durable.result(wid)
        assert first.status == "critical" and first.report is not None and first.report["reason"] == "effects_done"
        steps = await DBOS.list_workflow_steps_async(wid)
        call = next(s["function_id"] for s in steps if s["function_name"] == "tool:refund")
        forked = await durable.result((await DBOS.fork_workflow_async(wid, call)).workflow_id)
    finally:
        DBOS.destroy(destroy_registry=True)
    assert refunds.made == ["INV-7"]  # the run's refund only: the fork skipped it and made no second one
    assert forked.status == "critical" and forked.report is not None and forked.report["reason"] == "effects_done"
