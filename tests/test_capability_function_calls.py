"""A function capability's call has a tool call's protection: a started mark, the unknown-outcome policy, the ledger.

A function capability (an async function, not an agent) that charges a card was performed as
a plain journal step: no ``tool.started`` mark, so a run cut (a crash, a cancel) during its
call left no trace of it, and ``resume()`` called it again — the card charged twice. Nor did
the attempt ledger know it: a Router's retry of the Capabilities route called it again too.
Now its call goes through the tool path: a resume applies ``on_unknown_tool_outcome``
("fail" by default: :class:`ToolOutcomeUnknown`, nothing repeated; "retry": called again
under the same idempotency key; "skip": not called), a ``repeatable`` function capability is
called again, and a framework retry after it completed is answered from the ledger.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from jeeves_router import Agent, Router, RouterRoute
from jeeves_router.architectures.capabilities.architecture import (
    Capabilities,
    Capability,
    CapabilityCall,
    CapabilityOutput,
)
from jeeves_router.errors import UsageError
from jeeves_router.journal import JournalRuntime, current_idempotency_key
from jeeves_router.journal.base import Journal
from jeeves_router.recovery import ErrorClassification, ErrorContext, ErrorSeverity, Recovery
from jeeves_router.testing import RecordedSleeps, ScriptedModel, StaticClassifier
from jeeves_router.usage import Usage
from tests.task_helpers import pending_tasks, settled_tasks, warnings_of_this_test
from tests.test_capabilities import Brain, plan
from tests.test_journal_surrogates import journals  # noqa: F401  (fixture)
from tests.test_seams_lifecycle import cancelled_once

CHARGED = Usage(input_tokens=7, output_tokens=3, requests=1, cost_usd=0.0)  # what the charge reports


class Charge:
    """A function capability that charges a card; with ``stall`` its first call waits to be cut."""

    def __init__(self, *, stall: bool = False) -> None:
        self.keys: list[str | None] = []  # the idempotency key of each call
        self.reached = anyio.Event()
        self.stall = stall

    async def __call__(self, call: CapabilityCall) -> CapabilityOutput:
        self.keys.append(current_idempotency_key())
        if self.stall and len(self.keys) == 1:
            self.reached.set()
            await anyio.sleep(30)  # cut here: the charge may have gone through
        return CapabilityOutput("charged 40 EUR", usage=CHARGED)


def shop(charge: Charge, runtime: JournalRuntime | None = None, *, repeatable: bool = False) -> Agent:
    brain = Brain(yes={"charge"}, plans=[plan("charge")])
    caps = Capabilities(
        [Capability("charge", charge, "charges the card", repeatable=repeatable)],
        recovery=Recovery(sleep=RecordedSleeps()),
    )
    return Agent("Shop.", name="shop", model=brain.model, architecture=caps, runtime=runtime)


async def cut_mid_charge(journal: Journal, charge: Charge, *, repeatable: bool = False) -> None:
    """Run the shop until the charge is under way, then cancel it (as a crash would leave the journal)."""
    agent = shop(charge, JournalRuntime(journal), repeatable=repeatable)
    before = await settled_tasks()
    with warnings_of_this_test("error"):
        scope = await cancelled_once(charge.reached, lambda: agent.run("charge my card", session_id="s"))
        gc.collect()
    assert scope.cancelled_caught and pending_tasks() <= before
    assert len(charge.keys) == 1 and charge.keys[0] is not None  # called once, under its idempotency key


@pytest.mark.anyio
async def test_resume_does_not_call_a_function_capability_cut_mid_call_again(
    journals: Callable[[], Journal],  # noqa: F811
) -> None:
    charge = Charge(stall=True)
    await cut_mid_charge(journals(), charge)
    resumed = await shop(charge, JournalRuntime(journals())).resume("s")
    assert len(charge.keys) == 1  # not charged twice
    assert resumed.status == "critical" and resumed.report is not None
    assert (resumed.report["operation"], resumed.report["error"]["type"]) == ("capability:charge", "ToolOutcomeUnknown")


@pytest.mark.anyio
async def test_resume_calls_a_cut_function_capability_again_under_retry_with_the_same_key(
    journals: Callable[[], Journal],  # noqa: F811
) -> None:
    charge = Charge(stall=True)
    await cut_mid_charge(journals(), charge)
    resumed = await shop(charge, JournalRuntime(journals(), on_unknown_tool_outcome="retry")).resume("s")
    assert (resumed.status, resumed.output) == ("ok", "charged 40 EUR")
    assert len(charge.keys) == 2 and charge.keys[1] == charge.keys[0]  # the remote system sees one charge


@pytest.mark.anyio
async def test_resume_skips_a_cut_function_capability_under_skip(
    journals: Callable[[], Journal],  # noqa: F811
) -> None:
    charge = Charge(stall=True)
    await cut_mid_charge(journals(), charge)
    resumed = await shop(charge, JournalRuntime(journals(), on_unknown_tool_outcome="skip")).resume("s")
    assert len(charge.keys) == 1
    assert (resumed.status, resumed.output) == (
        "ok",
        "the outcome of this charge call is unknown (interrupted); it was not repeated",
    )


@pytest.mark.anyio
async def test_resume_calls_a_cut_repeatable_function_capability_again(
    journals: Callable[[], Journal],  # noqa: F811
) -> None:
    charge = Charge(stall=True)
    await cut_mid_charge(journals(), charge, repeatable=True)
    resumed = await shop(charge, JournalRuntime(journals()), repeatable=True).resume("s")  # the default, "fail"
    assert (resumed.status, resumed.output) == ("ok", "charged 40 EUR")
    assert len(charge.keys) == 2 and charge.keys[1] == charge.keys[0]


@pytest.mark.anyio
async def test_resume_of_a_completed_run_replays_a_function_capability_without_calling_it(
    journals: Callable[[], Journal],  # noqa: F811
) -> None:
    charge = Charge()
    first = await shop(charge, JournalRuntime(journals())).run("charge my card", session_id="s")
    replayed = await shop(charge, JournalRuntime(journals())).resume("s")
    assert (first.output, replayed.output) == ("charged 40 EUR", "charged 40 EUR")
    assert len(charge.keys) == 1 and charge.keys[0] is not None


def retried_checkout(charge: Charge, *, repeatable: bool) -> tuple[Agent, Brain, ScriptedModel]:
    """A desk whose ``checkout`` route charges (a function capability), then mails a receipt (an agent).

    The receipt's first attempt fails critically; the Capabilities run re-raises it and the
    desk's route judges it retriable: the desk runs the whole route again.
    """

    def judged(exc: BaseException, ctx: ErrorContext) -> ErrorClassification | None:
        return ErrorClassification(ErrorSeverity.RETRIABLE) if isinstance(exc, LookupError) else None

    receipt_model = ScriptedModel([LookupError("no mail server"), "Receipt sent."])
    receipt = Agent("Receipts.", name="receipt", model=receipt_model)
    brain = Brain(yes={"charge", "receipt"}, plans=[plan("charge", "receipt")])
    caps = [
        Capability("charge", charge, "charges the card", repeatable=repeatable),
        Capability("receipt", receipt, "mails a receipt"),
    ]
    checkout = Agent(
        "Checkout.",
        name="checkout",
        model=brain.model,
        architecture=Capabilities(caps, recovery=Recovery(reraise=True)),
    )
    router = Router(
        [RouterRoute("checkout", checkout, classify_error=judged)],
        classifier=StaticClassifier("checkout"),
        recovery=Recovery(sleep=RecordedSleeps()),
    )
    return Agent("Desk.", name="desk", architecture=router), brain, receipt_model


@pytest.mark.anyio
async def test_a_routers_retry_answers_a_completed_function_capability_from_the_ledger() -> None:
    charge = Charge()
    desk, brain, receipt_model = retried_checkout(charge, repeatable=False)
    result = await desk.run("check out")
    assert (result.status, result.output) == ("ok", "Receipt sent.")
    assert len(charge.keys) == 1  # the retry's charge is the first attempt's, not a second one
    assert len(brain.model.requests) == 6 and len(receipt_model.requests) == 2  # the route ran twice
    sent = len(brain.model.requests) + len(receipt_model.requests)
    assert result.usage.requests == sent + CHARGED.requests  # the charge's reported usage counted once


@pytest.mark.anyio
async def test_a_routers_retry_calls_a_repeatable_function_capability_again() -> None:
    charge = Charge()
    desk, brain, receipt_model = retried_checkout(charge, repeatable=True)
    result = await desk.run("check out")
    assert (result.status, result.output) == ("ok", "Receipt sent.")
    assert len(charge.keys) == 2  # a read: the retry reads afresh
    sent = len(brain.model.requests) + len(receipt_model.requests)
    assert result.usage.requests == sent + 2 * CHARGED.requests


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_repeatable_must_be_a_bool(value: Any) -> None:
    with pytest.raises(UsageError, match="capability 'charge': repeatable must be True or False"):
        Capability("charge", Charge(), "charges the card", repeatable=value)


def test_an_agent_capability_cannot_be_repeatable() -> None:
    agent = Agent("Receipts.", name="receipt", model=ScriptedModel(["sent"]))
    with pytest.raises(UsageError, match="repeatable applies to a function capability"):
        Capability("receipt", agent, "mails a receipt", repeatable=True)


@pytest.mark.anyio
@pytest.mark.parametrize("repeatable", [False, True], ids=["not-repeatable", "repeatable"])
async def test_a_recovered_workflow_applies_the_unknown_outcome_policy_to_a_function_capability(
    tmp_path: Path, repeatable: bool
) -> None:
    """A fork from the capability's call keeps its start mark, not its result: a worker killed mid-call."""
    from dbos import DBOS

    from jeeves_router.durable.dbos import DBOSRuntime, DurableAgents, _sqlite_timestamps_work, dbos_config

    if not _sqlite_timestamps_work():
        pytest.skip("DBOS cannot write a SQLite system database with this Python's SQLite")
    charge = Charge()
    durable = DurableAgents(
        [shop(charge, DBOSRuntime(), repeatable=repeatable)],  # type: ignore[arg-type]  # the default policy, "fail"
        workflow_name=f"jeeves_test.capability_unknown_{repeatable}",
    )
    DBOS(config=dbos_config("jeeves-sqlite-test", f"sqlite:///{tmp_path / 'dbos.sqlite'}", executor_id="solo"))
    try:
        DBOS.launch()
        await durable.register_queue(polling_interval_sec=0.1)
        wid = await durable.enqueue("charge my card", session_id="q1", workflow_id="wf-1")
        assert (await durable.result(wid)).output == "charged 40 EUR"
        steps = await DBOS.list_workflow_steps_async(wid)
        call = next(s["function_id"] for s in steps if s["function_name"] == "capability:charge")
        forked = await DBOS.fork_workflow_async(wid, call)
        result = await durable.result(forked.workflow_id)
    finally:
        DBOS.destroy(destroy_registry=True)
    assert charge.keys[0] is not None
    if repeatable:  # a read: called again, under the call's own key
        assert (result.status, result.output) == ("ok", "charged 40 EUR")
        assert len(charge.keys) == 2 and charge.keys[1] == charge.keys[0]
    else:  # not charged twice
        assert result.status == "critical" and result.report is not None
        assert result.report["error"]["type"] == "ToolOutcomeUnknown"
        assert len(charge.keys) == 1
