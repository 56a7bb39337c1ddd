"""After a replan, a plan that repeats a completed step (same capability, same task) does not run
it again: the earlier result answers it and ``capability.completed`` says so (``answered_from``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jeeves_router import Agent, tool
from jeeves_router.architectures.capabilities.architecture import Capability
from jeeves_router.events import CapabilityCompleted, CapabilityStarted, RecoveryReplan
from jeeves_router.recovery import ErrorSeverity, ExecutionError
from jeeves_router.testing import Call, FunctionModel, Reply, ScriptedModel, capture_events
from tests.test_capabilities import Brain, Fn, agent, of, plan, result


def refunds_agent(refunds: list[str]) -> Agent:
    @tool
    def refund(invoice: str) -> str:
        """Refund an invoice."""
        refunds.append(invoice)
        return f"refunded {invoice}"

    one_round = [Reply(calls=[Call("refund", {"invoice": "INV-7"})]), "Refunded INV-7."]
    # two rounds scripted: a second run of the step would refund again (the defect), not run dry
    model = ScriptedModel([*one_round, *one_round])
    return Agent("Refunds.", name="refunds", model=model, tools=[refund])


def replanned_desk(refunds: list[str], notify: Fn, second_plan: str) -> tuple[Agent, Brain]:
    brain = Brain(yes={"refunds", "notify"}, plans=[plan("refunds", "notify"), second_plan])
    caps = [
        Capability("refunds", refunds_agent(refunds), "refunds invoices"),
        Capability("notify", notify, "tells the customer"),
    ]
    return agent(brain, caps), brain


def failing_once() -> Fn:
    return Fn("Customer told.", fail=[ExecutionError(ErrorSeverity.REPLANNING, "mail server moved", "notify")])


@pytest.mark.anyio
async def test_a_replan_that_repeats_a_completed_refund_does_not_refund_twice() -> None:
    refunds: list[str] = []
    notify = failing_once()
    desk, brain = replanned_desk(refunds, notify, plan("refunds", "notify"))
    events = await capture_events(desk, "refund INV-7 and tell me")
    res = result(events)
    assert refunds == ["INV-7"]
    assert res.status == "ok" and res.output == "Customer told."
    assert brain.calls["plan"] == 2 and len(of(events, RecoveryReplan)) == 1
    completed = [(e.capability, e.step, e.ok, e.answered_from) for e in of(events, CapabilityCompleted)]
    assert completed == [
        ("refunds", 1, True, 0),
        ("notify", 2, False, 0),
        ("refunds", 3, True, 1),
        ("notify", 4, True, 0),
    ]
    assert [(e.capability, e.step) for e in of(events, CapabilityStarted)] == [
        ("refunds", 1),
        ("notify", 2),
        ("notify", 4),
    ]
    assert res.metadata["steps"] == ("refunds", "notify")


@pytest.mark.anyio
async def test_a_repeated_step_that_ends_the_new_plan_answers_with_its_earlier_result() -> None:
    refunds: list[str] = []
    desk, _ = replanned_desk(refunds, failing_once(), plan("notify", "refunds"))
    res = await desk.run("refund INV-7 and tell me")
    assert refunds == ["INV-7"] and res.status == "ok" and res.output == "Refunded INV-7."


@pytest.mark.anyio
async def test_a_step_with_another_task_still_runs_after_a_replan() -> None:
    refunds: list[str] = []
    other = json.dumps(
        {
            "steps": [
                {"capability": "refunds", "task": "refund INV-7 again"},
                {"capability": "notify", "task": "do notify"},
            ]
        }
    )
    desk, _ = replanned_desk(refunds, failing_once(), other)
    res = await desk.run("refund INV-7 and tell me")
    assert refunds == ["INV-7", "INV-7"] and res.status == "ok"


class Balance:
    """An agent that tells the account's balance without a tool call: 100 before the refund, 60 after it.

    An agent, not a function capability: a function capability's call is a call with effects
    (or a read, when ``repeatable``) as a tool's is, so only an agent's step calls no tool.
    """

    def __init__(self, refunds: list[str]) -> None:
        self.refunds = refunds
        self.reads = 0
        self.agent = Agent("Balance.", name="balance", model=FunctionModel(self._read, name="balance"))

    def _read(self, request: object) -> str:
        self.reads += 1
        return f"balance {60 if self.refunds else 100}"


@pytest.mark.anyio
async def test_a_new_plan_that_repeats_a_step_twice_runs_the_second_one_afresh() -> None:
    # plan 1 reads the balance once, refunds, fails to notify; plan 2 reads, refunds, reads again:
    # the first read and the refund are plan 1's, the second read is a new one (after the refund)
    refunds: list[str] = []
    balance = Balance(refunds)
    steps = [("balance", "read the balance"), ("refunds", "refund INV-7")]
    first = json.dumps({"steps": [{"capability": c, "task": t} for c, t in [*steps, ("notify", "tell")]]})
    second = json.dumps({"steps": [{"capability": c, "task": t} for c, t in [*steps, steps[0]]]})
    brain = Brain(yes={"balance", "refunds", "notify"}, plans=[first, second])
    caps = [
        Capability("balance", balance.agent, "reads the balance"),
        Capability("refunds", refunds_agent(refunds), "refunds invoices"),
        Capability("notify", failing_once(), "tells the customer"),
    ]
    events = await capture_events(agent(brain, caps), "refund INV-7 and show the balance")
    res = result(events)
    assert refunds == ["INV-7"] and balance.reads == 2
    assert res.status == "ok" and res.output == "balance 60"
    answered = [(e.capability, e.step, e.answered_from) for e in of(events, CapabilityCompleted) if e.step > 3]
    assert answered == [("balance", 4, 1), ("refunds", 5, 2), ("balance", 6, 0)]


def status_agent(reads: list[str]) -> Agent:
    @tool(repeatable=True)
    def order_status(order: str) -> str:
        """Read an order's status."""
        reads.append(order)
        return f"{order}: {'refunded' if len(reads) > 1 else 'paid'}"

    one_round = [Reply(calls=[Call("order_status", {"order": "A-1"})]), "Status read."]
    return Agent("Status.", name="status", model=ScriptedModel([*one_round, *one_round]), tools=[order_status])


@pytest.mark.anyio
async def test_a_refund_listed_twice_in_one_plan_is_made_once() -> None:
    refunds: list[str] = []
    brain = Brain(yes={"refunds"}, plans=[plan("refunds", "refunds")])  # the same capability and task twice
    events = await capture_events(agent(brain, [Capability("refunds", refunds_agent(refunds), "refunds")]), "refund")
    assert refunds == ["INV-7"] and result(events).status == "ok"
    completed = [(e.capability, e.step, e.answered_from) for e in of(events, CapabilityCompleted)]
    assert completed == [("refunds", 1, 0), ("refunds", 2, 1)]  # the second is answered by the first
    assert [e.step for e in of(events, CapabilityStarted)] == [1]


@pytest.mark.anyio
async def test_a_read_listed_twice_in_one_plan_reads_twice() -> None:
    # only a repeatable tool was called: no effect to protect, so the step runs again (fresh data)
    reads: list[str] = []
    brain = Brain(yes={"status"}, plans=[plan("status", "status")])
    events = await capture_events(agent(brain, [Capability("status", status_agent(reads), "reads")]), "status")
    assert reads == ["A-1", "A-1"] and result(events).status == "ok"
    assert [e.answered_from for e in of(events, CapabilityCompleted)] == [0, 0]


@pytest.mark.anyio
async def test_after_a_replan_a_refund_repeated_twice_is_still_made_once() -> None:
    refunds: list[str] = []
    desk, _ = replanned_desk(refunds, failing_once(), plan("refunds", "refunds", "notify"))
    events = await capture_events(desk, "refund INV-7 and tell me")
    assert refunds == ["INV-7"] and result(events).status == "ok"
    answered = [(e.capability, e.step, e.answered_from) for e in of(events, CapabilityCompleted) if e.step > 2]
    assert answered == [("refunds", 3, 1), ("refunds", 4, 1), ("notify", 5, 0)]


@pytest.mark.anyio
@pytest.mark.parametrize("cut", [False, True], ids=["completed", "cut-after-the-first-step"])
async def test_a_journaled_plan_with_a_repeated_refund_resumes_to_one_refund(tmp_path: Path, cut: bool) -> None:
    # The second step is answered by the first on resume too: the first's refund is counted when replayed.
    from jeeves_router.journal import JournalRuntime, SQLiteJournal

    refunds: list[str] = []
    journal = SQLiteJournal(tmp_path / "j.db")
    brain = Brain(yes={"refunds"}, plans=[plan("refunds", "refunds")])
    caps = [Capability("refunds", refunds_agent(refunds), "refunds")]
    arch = agent(brain, caps).architecture
    desk = Agent("Orchestrator", name="desk", model=brain.model, architecture=arch, runtime=JournalRuntime(journal))
    if cut:
        async with desk.stream("refund", session_id="s") as events:
            async for ev in events:
                if isinstance(ev, CapabilityCompleted):
                    break  # the stream closes after the first refund step: the run is cut
        first = None
    else:
        first = await desk.run("refund", session_id="s")
    resumed = await desk.resume("s")
    assert refunds == ["INV-7"] and resumed.status == "ok" and resumed.output == "Refunded INV-7."
    if first is not None:
        assert (resumed.output, resumed.usage) == (first.output, first.usage)
    await journal.aclose()


@pytest.mark.anyio
async def test_after_a_replan_a_step_that_only_read_reads_again() -> None:
    # plan 1 reads the status (a repeatable tool), then notify fails; plan 2 repeats the read:
    # it runs again for fresh data instead of being answered with the stale "paid"
    reads: list[str] = []
    read, tell = {"capability": "status", "task": "read A-1"}, {"capability": "notify", "task": "tell"}
    first = json.dumps({"steps": [read, tell]})
    second = json.dumps({"steps": [read]})
    brain = Brain(yes={"status", "notify"}, plans=[first, second])
    caps = [
        Capability("status", status_agent(reads), "reads statuses"),
        Capability("notify", failing_once(), "tells the customer"),
    ]
    events = await capture_events(agent(brain, caps), "what is the status of A-1")
    assert reads == ["A-1", "A-1"] and result(events).status == "ok"
    assert [(e.step, e.answered_from) for e in of(events, CapabilityCompleted) if e.ok] == [(1, 0), (3, 0)]
