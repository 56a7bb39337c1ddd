"""Seams: resuming a completed run replays the recovery ladder's decisions, not only its steps.

A completed run replays with no model, classifier or tool call and gives the same result.
These cases cover what the ladder decided from things a replay does not reproduce by
itself: the wall clock (``time_limit_s``), the usage of a classifier's paid replies that
failed, a ``classify_error`` hook's judgement of the user's own exception class, and a
tool-infrastructure failure retried in the same live process.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from jeeves_router import Agent, Router, RouterRoute, tool
from jeeves_router.architectures.router.contract import CLASSIFIER_USAGE_KEY
from jeeves_router.classify.types import ClassifyRequest, ClassifyResult, with_spent_usage
from jeeves_router.events import Event
from jeeves_router.journal import JournalRuntime, SQLiteJournal, recorded_events
from jeeves_router.recovery import ErrorClassification, ErrorSeverity, Recovery
from jeeves_router.recovery.classify import ErrorContext
from jeeves_router.results import RunResult
from jeeves_router.testing import Call, FunctionModel, RecordedSleeps, Reply, ScriptedModel, StaticClassifier
from jeeves_router.tools import Tool, ToolContext, ToolOutcome
from jeeves_router.usage import Usage
from tests.recovery_clock import Clock
from tests.test_seams_journal import NotMyDesk, reclassifying_desk

USAGE = Usage(input_tokens=10, output_tokens=5, requests=1)


def same(replayed: RunResult, first: RunResult) -> None:
    """``replayed`` is ``first`` again: status, output, report reason and error, usage."""
    assert (replayed.status, replayed.output) == (first.status, first.output)
    assert (replayed.usage, replayed.usage_by_route) == (first.usage, first.usage_by_route)
    if first.report is not None:
        assert replayed.report is not None
        assert replayed.report["reason"] == first.report["reason"]
        assert replayed.report.get("error") == first.report.get("error")
        assert replayed.report["attempts"] == first.report["attempts"]


async def kinds(journal: SQLiteJournal, session_id: str) -> list[str]:
    """The event kinds of the session's last recorded attempt."""
    events: list[Event] = await recorded_events(journal, session_id)
    return [e.kind for e in events]


# -- 1. a run stopped by the wall clock or by max_steps ---------------------------------------


def looping_agent(journal: SQLiteJournal, model: Any, recovery: Recovery, tools: list[Any]) -> Agent:
    from jeeves_router.architectures.react import ToolLoop

    return Agent(
        "Billing.",
        name="billing",
        model=model,
        tools=tools,
        architecture=ToolLoop(recovery=recovery),
        runtime=JournalRuntime(journal),
    )


@pytest.mark.anyio
async def test_a_run_stopped_by_the_time_limit_before_a_model_call_resumes_without_a_call(
    tmp_path: Path, clock: Clock
) -> None:
    @tool
    def lookup(invoice: str) -> str:
        """Look an invoice up (slowly: the run's time passes)."""
        clock.skipped += 60.0
        return f"{invoice}: paid"

    journal = SQLiteJournal(tmp_path / "j.db")
    model = ScriptedModel([Reply(calls=[Call("lookup", {"invoice": "INV-7"})], usage=USAGE), "Paid."])
    agent = looping_agent(journal, model, Recovery(time_limit_s=30.0, sleep=RecordedSleeps()), [lookup])
    first = await agent.run("is INV-7 paid?", session_id="s")
    assert first.status == "critical" and first.report["reason"] == "time_limit"
    assert len(model.requests) == 1 and first.usage == USAGE
    before = await kinds(journal, "s")
    clock.skipped = 0.0  # the replay is quick: its own clock never reaches the limit
    replayed = await agent.resume("s")
    assert len(model.requests) == 1  # the stop is replayed: the second model call is not made
    same(replayed, first)
    assert await kinds(journal, "s") == before


@pytest.mark.anyio
async def test_a_run_whose_failure_met_the_time_limit_resumes_to_the_same_stop(tmp_path: Path, clock: Clock) -> None:
    def answer(request: Any) -> Reply:
        clock.skipped += 60.0  # the failed call took the run past its limit: no retry
        raise TimeoutError("read timed out")

    journal = SQLiteJournal(tmp_path / "j.db")
    model = FunctionModel(answer, name="billing")
    agent = looping_agent(journal, model, Recovery(time_limit_s=30.0, sleep=RecordedSleeps()), [])
    first = await agent.run("is INV-7 paid?", session_id="s")
    assert first.status == "critical" and first.report["reason"] == "time_limit"
    assert len(model.requests) == 1
    clock.skipped = 0.0
    replayed = await agent.resume("s")
    assert len(model.requests) == 1  # no retry on resume either: the recorded decision was a stop
    same(replayed, first)


@pytest.mark.anyio
async def test_a_tool_cut_off_by_the_time_limit_resumes_to_the_same_stop_without_a_call(
    tmp_path: Path, clock: Clock
) -> None:
    calls: list[str] = []

    @tool
    async def lookup(invoice: str) -> str:
        """Look an invoice up (never answers)."""
        calls.append(invoice)
        clock.release()
        await anyio.sleep_forever()
        return "unreachable"

    journal = SQLiteJournal(tmp_path / "j.db")
    model = ScriptedModel([Reply(calls=[Call("lookup", {"invoice": "INV-7"})], usage=USAGE), "Paid."])
    # the time box cancels the tool when the run's limit passes (a real second: what is
    # asserted is where the run stopped, never how long it took); the run's time only
    # starts passing in the tool, so a slow machine does not spend the limit before it
    agent = looping_agent(journal, model, Recovery(time_limit_s=1.0, sleep=RecordedSleeps()), [lookup])
    clock.hold()
    first = await agent.run("is INV-7 paid?", session_id="s")
    assert first.status == "critical" and first.report["reason"] == "time_limit"
    assert calls == ["INV-7"] and len(model.requests) == 1
    replayed = await agent.resume("s")
    assert calls == ["INV-7"] and len(model.requests) == 1  # neither the tool nor the model runs again
    same(replayed, first)


@pytest.mark.anyio
async def test_a_routed_run_whose_specialist_failed_past_the_time_limit_resumes_to_the_same_stop(
    tmp_path: Path, clock: Clock
) -> None:
    def answer(request: Any) -> Reply:
        clock.skipped += 60.0
        raise TimeoutError("read timed out")

    model = FunctionModel(answer, name="billing")
    billing = Agent("Billing.", name="billing", model=model)
    router = Router(
        [RouterRoute("billing", billing)],
        classifier=StaticClassifier("billing", 0.9),
        recovery=Recovery(time_limit_s=30.0, sleep=RecordedSleeps()),
    )
    journal = SQLiteJournal(tmp_path / "j.db")
    agent = Agent("Desk", name="desk", runtime=JournalRuntime(journal), architecture=router)
    first = await agent.run("charged twice", session_id="s")
    assert first.status == "critical" and first.report["reason"] == "time_limit" and len(model.requests) == 1
    clock.skipped = 0.0
    replayed = await agent.resume("s")
    assert len(model.requests) == 1  # the router does not retry the route on resume
    same(replayed, first)


@pytest.mark.anyio
async def test_a_capability_cut_off_by_the_time_limit_resumes_to_the_same_stop(tmp_path: Path, clock: Clock) -> None:
    from jeeves_router.architectures.capabilities.architecture import Capabilities, Capability, CapabilityCall
    from tests.test_capabilities import Brain, plan

    calls: list[str] = []

    async def lookup(call: CapabilityCall) -> str:
        calls.append(call.task)
        clock.release()  # the run's time passes from here (however long the way here took)
        await anyio.sleep_forever()
        return "unreachable"

    brain = Brain(yes={"lookup"}, plans=[plan("lookup")])
    arch = Capabilities([Capability("lookup", lookup, "looks invoices up")], recovery=Recovery(time_limit_s=1.0))
    journal = SQLiteJournal(tmp_path / "j.db")
    agent = Agent("O", name="desk", model=brain.model, architecture=arch, runtime=JournalRuntime(journal))
    clock.hold()
    first = await agent.run("is INV-7 paid?", session_id="s")
    assert first.status == "critical" and first.report["reason"] == "time_limit" and calls == ["do lookup"]
    replayed = await agent.resume("s")
    assert calls == ["do lookup"]  # the capability is not run again
    same(replayed, first)


@pytest.mark.anyio
async def test_a_run_stopped_by_max_steps_resumes_without_a_call(tmp_path: Path) -> None:
    calls: list[str] = []

    @tool
    def lookup(invoice: str) -> str:
        """Look an invoice up."""
        calls.append(invoice)
        return f"{invoice}: paid"

    journal = SQLiteJournal(tmp_path / "j.db")
    model = ScriptedModel([Reply(calls=[Call("lookup", {"invoice": "INV-7"})], usage=USAGE), "Paid."])
    # max_steps=1: the first model turn and its tool call (part of the turn); the second turn is stopped
    agent = looping_agent(journal, model, Recovery(max_steps=1, sleep=RecordedSleeps()), [lookup])
    first = await agent.run("is INV-7 paid?", session_id="s")
    assert first.status == "critical" and first.report["reason"] == "max_steps"
    assert len(model.requests) == 1 and calls == ["INV-7"]
    before = await kinds(journal, "s")
    replayed = await agent.resume("s")
    assert len(model.requests) == 1 and calls == ["INV-7"]
    same(replayed, first)
    assert await kinds(journal, "s") == before


# -- 2. a failed classification's paid replies ------------------------------------------------


class PaidThenFailing:
    """A classifier whose first ``failures`` calls fail after paying for a reply (``spent_usage``)."""

    def __init__(self, error: Exception, failures: int = 1) -> None:
        self.error, self.failures, self.calls = error, failures, 0

    async def classify(self, request: ClassifyRequest) -> ClassifyResult:
        self.calls += 1
        if self.calls <= self.failures:
            raise with_spent_usage(type(self.error)(*self.error.args), USAGE)
        return await StaticClassifier("billing", 0.9).classify(request)


def classified_desk(journal: SQLiteJournal, classifier: PaidThenFailing) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel([Reply("Refund issued.", usage=USAGE)], name="billing")
    billing = Agent("Billing.", name="billing", model=model)
    router = Router([RouterRoute("billing", billing)], classifier=classifier, recovery=Recovery(sleep=RecordedSleeps()))
    return Agent("Desk", name="desk", runtime=JournalRuntime(journal), architecture=router), model


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("error", "status"), [(ValueError("no route in the reply"), "critical"), (TimeoutError("slow"), "ok")]
)
async def test_a_failed_classifications_paid_replies_count_the_same_after_resume(
    tmp_path: Path, error: Exception, status: str
) -> None:
    journal = SQLiteJournal(tmp_path / "j.db")
    classifier = PaidThenFailing(error)
    agent, model = classified_desk(journal, classifier)
    first = await agent.run("charged twice", session_id="s")
    assert first.status == status
    assert first.usage_by_route[CLASSIFIER_USAGE_KEY] == USAGE  # the failed classification's reply
    calls, requests = classifier.calls, len(model.requests)
    replayed = await agent.resume("s")
    assert (classifier.calls, len(model.requests)) == (calls, requests)
    same(replayed, first)


# -- 3. a classify_error hook's judgement of the user's own exception class -----------------


def catch_all(exc: BaseException, ctx: ErrorContext) -> ErrorClassification:
    """Reclassify on the user's own class; anything else is critical."""
    if isinstance(exc, NotMyDesk):
        return ErrorClassification(ErrorSeverity.RECLASSIFICATION)
    return ErrorClassification(ErrorSeverity.CRITICAL)


def explaining(exc: BaseException, ctx: ErrorContext) -> ErrorClassification | None:
    """Reclassify on the user's own class, with a message and metadata for the classifier."""
    if isinstance(exc, NotMyDesk):
        return ErrorClassification(
            ErrorSeverity.RECLASSIFICATION, user_message="not a billing question", metadata={"hint": "hours"}
        )
    return None


class Ticket:
    """A value with no JSON form (shown to the classifier by its ``str``)."""

    def __str__(self) -> str:
        return "ticket T-9"


def structured(exc: BaseException, ctx: ErrorContext) -> ErrorClassification | None:
    """Reclassify with metadata that JSON changes: a tuple, a nested mapping, an object."""
    if isinstance(exc, NotMyDesk):
        return ErrorClassification(
            ErrorSeverity.RECLASSIFICATION, metadata={"ids": (7, 8), "seen": {"b": (1,), "a": None}, "ticket": Ticket()}
        )
    return None


@pytest.mark.anyio
@pytest.mark.parametrize("hook", [catch_all, explaining, structured])
async def test_a_hooks_judgement_of_the_users_own_exception_is_replayed(tmp_path: Path, hook: Any) -> None:
    journal = SQLiteJournal(tmp_path / "j.db")
    agent, classifier, _, _ = reclassifying_desk(
        journal, [NotMyDesk("a question about opening hours")], ["General answer."], hook
    )
    first = await agent.run("what are your hours?", session_id="s")
    assert (first.status, first.route, first.output) == ("ok", "general", "General answer.")
    assert len(classifier.feedback) == 2
    before = await kinds(journal, "s")
    fresh, classifier, billing_model, general_model = reclassifying_desk(journal, [], [], hook)
    replayed = await fresh.resume("s")
    assert classifier.feedback == [] and billing_model.requests == general_model.requests == []  # nothing called
    assert (replayed.status, replayed.route, replayed.output) == (first.status, first.route, first.output)
    same(replayed, first)
    assert await kinds(journal, "s") == before


# -- 4. a tool-infrastructure failure retried in the same live process -----------------------


class FlakyTransport(Tool):
    """A tool whose transport fails ``failures`` times before the call reaches the function."""

    def __init__(self, fn: Any, failures: int) -> None:
        super().__init__(fn)
        self.failures = failures

    async def call(self, arguments: Any, ctx: ToolContext) -> ToolOutcome:
        if self.failures:
            self.failures -= 1
            raise ConnectionResetError("tool server dropped the connection")
        return await super().call(arguments, ctx)


def flaky_refund_clerk(journal: SQLiteJournal, refunds: list[str], **options: Any) -> tuple[Agent, ScriptedModel]:
    """A billing agent whose refund tool's transport fails once before the call reaches it."""

    def refund(invoice: str) -> str:
        """Refund an invoice."""
        refunds.append(invoice)
        return f"refunded {invoice}"

    model = ScriptedModel([Reply(calls=[Call("refund", {"invoice": "INV-7"})], usage=USAGE), "Refunded."])
    policy = options.pop("on_unknown_tool_outcome", "fail")
    agent = Agent(
        "Billing.",
        name="billing",
        model=model,
        tools=[FlakyTransport(refund, failures=1)],
        runtime=JournalRuntime(journal, on_unknown_tool_outcome=policy),
        **options,
    )
    return agent, model


@pytest.mark.anyio
@pytest.mark.parametrize("policy", ["fail", "skip"])
async def test_a_tool_infrastructure_failure_is_retried_live_not_sent_to_the_unknown_outcome_policy(
    tmp_path: Path, policy: Any
) -> None:
    from jeeves_router.architectures.react import ToolLoop

    journal, refunds = SQLiteJournal(tmp_path / "j.db"), list[str]()
    recovering = ToolLoop(recovery=Recovery(sleep=RecordedSleeps()))
    agent, model = flaky_refund_clerk(journal, refunds, architecture=recovering, on_unknown_tool_outcome=policy)
    first = await agent.run("refund INV-7", session_id="s")
    # the failed attempt's outcome is known here (it raised): the retry calls the tool
    assert (first.status, first.output, refunds) == ("ok", "Refunded.", ["INV-7"])
    before = await kinds(journal, "s")
    replayed = await agent.resume("s")
    assert refunds == ["INV-7"] and len(model.requests) == 2
    same(replayed, first)
    assert await kinds(journal, "s") == before


@pytest.mark.anyio
async def test_resuming_a_run_that_failed_on_a_tool_infrastructure_error_calls_the_tool_again(tmp_path: Path) -> None:
    refunds: list[str] = []
    agent, _ = flaky_refund_clerk(SQLiteJournal(tmp_path / "j.db"), refunds)
    with pytest.raises(ConnectionResetError):  # no recovery: the failure ends the run
        await agent.run("refund INV-7", session_id="s")
    result = await agent.resume("s")  # the journal says the call raised: its outcome is known
    assert (result.status, result.output, refunds) == ("ok", "Refunded.", ["INV-7"])
