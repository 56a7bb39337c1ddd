"""Seams: the capability architecture under every recovery severity, with a side-effect tool.

A capability agent calls a refund tool, then its next model call fails with each severity.
Whatever the ladder decides, the refund runs exactly once.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jeeves_router import Agent, tool
from jeeves_router.architectures.capabilities.architecture import Capabilities, Capability
from jeeves_router.errors import ModelError
from jeeves_router.events import Event, RecoveryReclassify, RecoveryReplan, RecoveryReport, RecoveryRetry
from jeeves_router.journal import JournalRuntime, SQLiteJournal
from jeeves_router.models.base import ModelRequest
from jeeves_router.recovery import Recovery
from jeeves_router.testing import Call, FunctionModel, RecordedSleeps, Reply, ScriptedModel, capture_events
from tests.test_capabilities import Brain, Fn, plan


def refunding_desk(severity: str, refunds: list[str], *, mode: str = "plan_first") -> Agent:
    """A desk whose ``pay`` capability refunds INV-7, then fails with ``severity``, then would refund again."""

    @tool
    def refund(invoice: str) -> str:
        """Refund an invoice."""
        refunds.append(invoice)
        return f"refunded {invoice}"

    again = [Call("refund", {"invoice": "INV-7"}), "Refund done."]
    model = ScriptedModel([Call("refund", {"invoice": "INV-7"}), ModelError("lost", severity=severity), *again, *again])
    pay = Agent("Payments.", name="pay", model=model, tools=[refund])
    caps = [Capability("pay", pay, "payments"), Capability("notify", Fn("notified"), "notifications")]
    brain = Brain(
        yes={"pay", "notify"},
        plans=[plan("pay"), plan("notify")],
        choices=['{"capability": "pay", "task": "refund"}', '{"answer": "ok"}'],
    )
    arch = Capabilities(caps, mode=mode, recovery=Recovery(sleep=RecordedSleeps()))  # type: ignore[arg-type]
    return Agent("Orchestrator", name="desk", model=brain.model, architecture=arch)


def kinds(events: list[Event]) -> list[type]:
    recovery = (RecoveryRetry, RecoveryReplan, RecoveryReclassify, RecoveryReport)
    return [type(e) for e in events if isinstance(e, recovery)]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["plan_first", "react"])
@pytest.mark.parametrize(
    ("severity", "status", "recovery"),
    [
        ("retriable", "ok", [RecoveryRetry]),  # the retry's refund is answered from the run's ledger
        ("replanning", "critical", [RecoveryReport]),  # a new plan would refund again from scratch: stop
        ("reclassification", "ok", [RecoveryReclassify]),  # pay is excluded; notify answers
        ("critical", "critical", [RecoveryReport]),
    ],
)
async def test_a_capability_side_effect_runs_once_under_each_severity(
    severity: str, status: str, recovery: list[type], mode: str
) -> None:
    refunds: list[str] = []
    events = await capture_events(refunding_desk(severity, refunds, mode=mode), "refund INV-7")
    result = events[-1].result  # type: ignore[union-attr]
    assert refunds == ["INV-7"]
    assert result.status == status
    assert kinds(events) == recovery


@pytest.mark.anyio
async def test_a_replan_after_a_completed_tool_call_stops_with_a_clear_report() -> None:
    refunds: list[str] = []
    result = await refunding_desk("replanning", refunds).run("refund INV-7")
    assert refunds == ["INV-7"]
    assert result.status == "critical" and result.report is not None
    assert result.report["reason"] == "effects_done"
    assert any("tool calls completed" in s for s in result.report["suggestions"])


@pytest.mark.anyio
async def test_a_fatal_failure_after_a_tool_call_raises_without_repeating_it() -> None:
    refunds: list[str] = []
    with pytest.raises(ModelError, match="lost"):
        await refunding_desk("fatal", refunds).run("refund INV-7")
    assert refunds == ["INV-7"]


@pytest.mark.anyio
async def test_a_replan_of_a_step_without_side_effects_still_replans() -> None:
    model = ScriptedModel([ModelError("bad plan step", severity="replanning"), "Paid."])
    pay = Agent("Payments.", name="pay", model=model)
    brain = Brain(yes={"pay"}, plans=[plan("pay")])
    arch = Capabilities([Capability("pay", pay, "payments")], recovery=Recovery(sleep=RecordedSleeps()))
    events = await capture_events(Agent("O", name="desk", model=brain.model, architecture=arch), "pay")
    assert events[-1].result.status == "ok"  # type: ignore[union-attr]
    assert kinds(events) == [RecoveryReplan] and brain.calls["plan"] == 2


def retried_refund_desk(refunds: list[str], journal: SQLiteJournal | None) -> tuple[Agent, FunctionModel]:
    """A plan with one ``pay`` capability whose agent refunds, then times out once before answering."""

    @tool
    def refund(invoice: str) -> str:
        """Refund an invoice."""
        refunds.append(invoice)
        return f"refunded {invoice}"

    failures = [TimeoutError("read timed out")]

    def answer(request: ModelRequest) -> Reply:
        if request.messages[-1].role == "tool":
            if failures:
                raise failures.pop()
            return Reply(text="Refunded INV-7.")
        return Reply(calls=[Call("refund", {"invoice": "INV-7"})])

    model = FunctionModel(answer, name="pay")
    pay = Agent("Payments.", name="pay", model=model, tools=[refund])
    brain = Brain(yes={"pay"}, plans=[plan("pay")])
    arch = Capabilities([Capability("pay", pay, "payments")], recovery=Recovery(sleep=RecordedSleeps()))
    runtime = JournalRuntime(journal) if journal is not None else None
    return Agent("Orchestrator", name="desk", model=brain.model, architecture=arch, runtime=runtime), model


@pytest.mark.anyio
@pytest.mark.parametrize("journaled", [False, True])
async def test_a_retried_capability_counts_the_usage_of_its_failed_attempt(tmp_path: Path, journaled: bool) -> None:
    refunds: list[str] = []
    desk, model = retried_refund_desk(refunds, SQLiteJournal(tmp_path / "j.db") if journaled else None)
    result = await desk.run("refund INV-7", session_id="s")
    assert (result.status, result.output, refunds) == ("ok", "Refunded INV-7.", ["INV-7"])
    answered = len(model.requests) - 1  # every request but the timed-out one returned a response
    assert answered == (2 if journaled else 3)  # with a journal the retry takes the refund call from it
    assert result.usage_by_route["pay"].requests == len(model.requests)  # the timed-out request counts too
    if journaled:
        replayed = await desk.resume("s")
        assert len(model.requests) == answered + 1 and refunds == ["INV-7"]
        assert (replayed.output, replayed.usage, replayed.usage_by_route) == (
            result.output,
            result.usage,
            result.usage_by_route,
        )


@pytest.mark.anyio
async def test_a_replan_of_a_step_that_only_read_with_a_repeatable_tool_still_replans() -> None:
    reads: list[str] = []

    @tool(repeatable=True)
    def balance(account: str) -> str:
        """An account's balance (a read, harmless to repeat)."""
        reads.append(account)
        return "42.00 EUR"

    model = ScriptedModel(
        [Call("balance", {"account": "A-1"}), ModelError("bad plan step", severity="replanning"), "Paid."]
    )
    pay = Agent("Payments.", name="pay", model=model, tools=[balance])
    brain = Brain(yes={"pay"}, plans=[plan("pay")])
    arch = Capabilities([Capability("pay", pay, "payments")], recovery=Recovery(sleep=RecordedSleeps()))
    events = await capture_events(Agent("O", name="desk", model=brain.model, architecture=arch), "pay")
    assert events[-1].result.status == "ok"  # type: ignore[union-attr]
    assert kinds(events) == [RecoveryReplan] and brain.calls["plan"] == 2  # not stopped with "effects_done"
    assert reads == ["A-1"]
