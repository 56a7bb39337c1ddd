"""Seams: a recovering Router acting on a failure of the agent its route handed off to.

billing charges (a tool with a side effect), then hands off to refunds, which refunds (another)
and whose next model call fails: a timeout (RETRIABLE: the Router runs the failed step
again) or a "not mine" (RECLASSIFICATION by refunds' own hook: general answers instead,
billing left out). With or without a journal, each tool ran once: the retried step's
completed calls are answered from the run's attempt ledger, or its journal; and ``resume``
of the journaled session replays the run, calling no tool and no model, to the same output
and usage.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jeeves_router import Agent, Router, RouterRoute, tool
from jeeves_router.classify.types import ClassifyRequest, ClassifyResult
from jeeves_router.journal import JournalRuntime, SQLiteJournal
from jeeves_router.models.base import ModelRequest
from jeeves_router.recovery import ErrorClassification, ErrorContext, ErrorSeverity, Recovery
from jeeves_router.testing import Call, FunctionModel, RecordedSleeps, Reply, StaticClassifier


class NotMine(Exception):
    """The agent says the request is not for it."""


def not_mine(exc: BaseException, context: ErrorContext) -> ErrorClassification | None:
    return ErrorClassification(ErrorSeverity.RECLASSIFICATION, "Not a refund.") if isinstance(exc, NotMine) else None


class FirstOffered(StaticClassifier):
    """Answers the first route still offered (billing, then general once billing is left out)."""

    async def classify(self, request: ClassifyRequest) -> ClassifyResult:
        self.route = request.routes[0].name
        return await super().classify(request)


def desk(failure: str, journal: SQLiteJournal | None, calls: dict[str, int]) -> Agent:
    @tool
    def charge(invoice: str) -> str:
        """Charge the fee."""
        calls["charge"] += 1
        return "charged"

    @tool
    def refund(invoice: str) -> str:
        """Refund an invoice."""
        calls["refund"] += 1
        return "refunded"

    def refunds_answer(request: ModelRequest) -> Reply | str:
        calls["refunds model"] += 1
        if request.messages[-1].role != "tool":
            return Reply(calls=[Call("refund", {"invoice": "INV-7"})])
        if calls["failures"]:
            calls["failures"] -= 1
            raise TimeoutError("read timed out") if failure == "retry" else NotMine("not a refund")
        return "Refund done."

    def billing_answer(request: ModelRequest) -> Reply:
        calls["billing model"] += 1
        if request.messages[-1].role == "tool":
            return Reply(calls=[Call("transfer_to_refunds", {"reason": "a refund"})])
        return Reply(calls=[Call("charge", {"invoice": "INV-7"})])

    refunds = Agent(
        "Refunds.",
        name="refunds",
        model=FunctionModel(refunds_answer, name="r"),
        tools=[refund],
        classify_error=not_mine,
    )
    billing = Agent(
        "Billing.", name="billing", model=FunctionModel(billing_answer, name="b"), tools=[charge], handoffs=[refunds]
    )
    general = Agent("General.", name="general", model=FunctionModel(lambda r: "general answer", name="g"))
    router = Router(
        [RouterRoute("billing", billing), RouterRoute("general", general)],
        classifier=FirstOffered(),
        recovery=Recovery(sleep=RecordedSleeps()),
    )
    runtime = JournalRuntime(journal) if journal is not None else None
    return Agent("Desk", name="desk", runtime=runtime, architecture=router)


@pytest.mark.anyio
@pytest.mark.parametrize("journaled", [False, True])
@pytest.mark.parametrize(("failure", "output"), [("retry", "Refund done."), ("reclassify", "general answer")])
async def test_a_failure_after_a_handoff_runs_neither_agents_tool_twice(
    tmp_path: Path, failure: str, output: str, journaled: bool
) -> None:
    calls = dict.fromkeys(["charge", "refund", "billing model", "refunds model"], 0) | {"failures": 1}
    journal = SQLiteJournal(tmp_path / "j.db") if journaled else None
    result = await desk(failure, journal, calls).run("refund INV-7", session_id="s")
    assert (result.status, result.output) == ("ok", output)
    assert (calls["charge"], calls["refund"]) == (1, 1)
    if journal is not None:
        seen = dict(calls)
        replayed = await desk(failure, journal, calls).resume("s")
        assert calls == seen  # no tool, no model
        assert (replayed.output, replayed.usage) == (result.output, result.usage)
