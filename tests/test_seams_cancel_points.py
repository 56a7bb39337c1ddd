"""Seams: a cancel scope around a journaled, recovering Router cancelled at three more points.

``tests/test_seams_lifecycle.py`` cancels while a specialist's model streams and while a
recovery backoff waits. Here the run is cut while its classifier works, while a specialist's
tool runs, and while the agent it handed off to waits on its model — through ``run()`` and
through ``stream()``. Each time: the scope catches its cancellation at once, no task is left,
no warning, the journal records the run ``cut``, ``resume`` finishes it (a tool cut mid-call
has an unknown outcome: the default policy stops with a report instead of calling it again),
and a later run on the same session answers.
"""

from __future__ import annotations

import gc
from pathlib import Path

import anyio
import pytest

from jeeves_router import Agent, Router, RouterRoute, tool
from jeeves_router.classify.types import ClassifyRequest, ClassifyResult
from jeeves_router.journal import JournalRuntime, SQLiteJournal
from jeeves_router.models.base import ModelRequest
from jeeves_router.recovery import Recovery
from jeeves_router.testing import Call, FunctionModel, RecordedSleeps, Reply, StaticClassifier
from tests.task_helpers import pending_tasks, settled_tasks, warnings_of_this_test
from tests.test_seams_lifecycle import cancelled_once


class Stall:
    """Where the run waits (30 s) the first time: ``reached`` is set as it starts waiting."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.armed = True
        self.reached = anyio.Event()

    async def at(self, where: str) -> None:
        if self.armed and where == self.where:
            self.armed = False
            self.reached.set()
            await anyio.sleep(30)


class StallingClassifier(StaticClassifier):
    def __init__(self, stall: Stall) -> None:
        super().__init__("billing")
        self.stall = stall

    async def classify(self, request: ClassifyRequest) -> ClassifyResult:
        await self.stall.at("classification")
        return await super().classify(request)


def desk(journal: SQLiteJournal, stall: Stall, refunds: list[str]) -> Agent:
    """billing refunds, then hands off to closing, which answers."""

    @tool
    async def refund(invoice: str) -> str:
        """Refund an invoice."""
        refunds.append(invoice)
        await stall.at("tool call")
        return "refunded"

    async def closing_answer(request: ModelRequest) -> str:
        await stall.at("handoff")
        return "Refund done."

    closing = Agent("Closing.", name="closing", model=FunctionModel(closing_answer, name="closing"))

    def billing_answer(request: ModelRequest) -> Reply:
        if request.messages[-1].role == "tool":
            return Reply(calls=[Call("transfer_to_closing", {"reason": "refunded"})])
        return Reply(calls=[Call("refund", {"invoice": "INV-7"})])

    billing = Agent(
        "Billing.", name="billing", model=FunctionModel(billing_answer, name="b"), tools=[refund], handoffs=[closing]
    )
    router = Router(
        [RouterRoute("billing", billing)],
        classifier=StallingClassifier(stall),
        recovery=Recovery(sleep=RecordedSleeps()),
    )
    return Agent("Desk", name="desk", runtime=JournalRuntime(journal), architecture=router)


@pytest.mark.anyio
@pytest.mark.parametrize("how", ["run", "stream"])
@pytest.mark.parametrize("where", ["classification", "tool call", "handoff"])
async def test_a_run_cancelled_mid_step_is_cut_cleanly_and_the_session_goes_on(
    tmp_path: Path, where: str, how: str
) -> None:
    journal = SQLiteJournal(tmp_path / "j.db")
    stall = Stall(where)
    refunds: list[str] = []
    agent = desk(journal, stall, refunds)

    async def body() -> None:
        if how == "run":
            await agent.run("refund INV-7", session_id="s")
        else:
            async with agent.stream("refund INV-7", session_id="s") as events:
                async for _ in events:
                    pass

    before = await settled_tasks()
    with warnings_of_this_test("error"):
        scope = await cancelled_once(stall.reached, body)
        gc.collect()
    assert scope.cancelled_caught
    assert pending_tasks() <= before
    ends = [e.record.status for e in await journal.read("s", types=("run.end",))]  # type: ignore[union-attr]
    assert ends == ["cut"]
    resumed = await agent.resume("s")
    if where == "tool call":  # it may have refunded: not called again (on_unknown_tool_outcome="fail")
        assert resumed.status == "critical" and resumed.report is not None
        assert resumed.report["error"]["type"] == "ToolOutcomeUnknown"
        assert refunds == ["INV-7"]
    else:
        assert (resumed.status, resumed.output, refunds) == ("ok", "Refund done.", ["INV-7"])
    later = await agent.run("thanks", session_id="s")
    assert later.status == "ok" and later.output == "Refund done."
