"""Seams: a failing stream under Router + recovery + a journal, then ``resume``.

What the consumer sees when a specialist's stream fails mid-way or before its first
token, what ``usage`` counts, and that resuming the session afterwards gives the same
result with no model call — also when the run ended on the failure (status "critical").
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path

import pytest

from jeeves_router import Agent, Router, RouterRoute
from jeeves_router.architectures.capabilities.architecture import Capabilities, Capability, CapabilityCall
from jeeves_router.classify.types import ClassifyRequest, ClassifyResult
from jeeves_router.errors import ModelError
from jeeves_router.events import Event, RecoveryReport, RecoveryRetry, RunFailed, TextDelta
from jeeves_router.journal import JournalRuntime, SQLiteJournal, recorded_events
from jeeves_router.messages import TextPart
from jeeves_router.models.base import ModelRequest, ModelResponse, ModelStreamItem, ModelTextDelta
from jeeves_router.models.openai import OpenAIModel
from jeeves_router.policies import RetryPolicy
from jeeves_router.recovery import ErrorClassification, ErrorSeverity, Recovery
from jeeves_router.testing import FunctionModel, RecordedSleeps, ScriptedModel, StaticClassifier
from jeeves_router.usage import Usage
from tests.loopback import LoopbackServer, Reply, Status, loopback  # noqa: F401

USAGE = Usage(input_tokens=10, output_tokens=5, requests=1)


class Breaking:
    """A model whose n-th stream yields ``plan[n][0]`` as chunks, then fails if ``plan[n][1]``."""

    def __init__(self, plan: Sequence[tuple[Sequence[str], bool]]) -> None:
        self.plan = list(plan)
        self.calls = 0

    @property
    def name(self) -> str:
        return "test:breaking"

    async def request(self, request: ModelRequest) -> ModelResponse:
        raise NotImplementedError

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        chunks, fail = self.plan[self.calls]
        self.calls += 1
        for c in chunks:
            yield ModelTextDelta(c)
        if fail:
            raise ModelError("connection dropped", severity="retriable")
        yield ModelResponse((TextPart("".join(chunks)),), USAGE, "end", "test")


def desk(journal: SQLiteJournal, model: object) -> Agent:
    billing = Agent("Billing.", name="billing", model=model)  # type: ignore[arg-type]
    general = Agent("General.", name="general", model=ScriptedModel([]))
    router = Router(
        [RouterRoute("billing", billing), RouterRoute("general", general)],
        classifier=StaticClassifier("billing", 0.9),
        recovery=Recovery(sleep=RecordedSleeps()),
    )
    return Agent("Desk", name="desk", runtime=JournalRuntime(journal), architecture=router)


async def consume(agent: Agent, prompt: str, session_id: str) -> list[Event]:
    events: list[Event] = []
    async for ev in agent.stream(prompt, session_id=session_id):
        events.append(ev)
    return events


def texts(events: list[Event]) -> list[str]:
    return [e.text for e in events if isinstance(e, TextDelta)]


@pytest.mark.anyio
async def test_a_stream_that_breaks_after_text_stops_once_and_resumes_to_the_same_critical_result(
    tmp_path: Path,
) -> None:
    journal = SQLiteJournal(tmp_path / "j.db")
    model = Breaking([(["Refund ", "iss"], True), (["never"], False)])
    agent = desk(journal, model)
    events = await consume(agent, "charged twice", "s")
    assert texts(events) == ["Refund ", "iss"]  # once each; no retry repeats them
    kinds = [e.kind for e in events]
    assert kinds[-3:] == ["run.failed", "recovery.report", "run.completed"]  # the failed attempt is marked
    first = events[-1].result  # type: ignore[union-attr]
    assert first.status == "critical" and first.report["reason"] == "output_started"
    assert model.calls == 1
    replayed = await agent.resume("s")
    assert model.calls == 1  # the failure is replayed from the journal: no model call
    assert (replayed.status, replayed.output, replayed.route) == (first.status, first.output, first.route)
    assert replayed.report is not None and replayed.report["reason"] == "output_started"
    attempts = await journal.read("s", types=("event",))
    again = [e.record.event["text"] for e in attempts if e.record.event["kind"] == "text.delta"]  # type: ignore[union-attr]
    assert again == ["Refund ", "iss"] * 2  # the resumed attempt streamed the same text once
    for n in (2, 3):  # and again: each replay keeps the failures it raised, so the next one finds them too
        again_result = await agent.resume("s")
        assert model.calls == 1, f"resume {n} called the model"
        assert again_result.status == "critical" and again_result.report is not None
        stable = ("reason", "severity", "attempts", "user_message")  # not its clock readings
        assert {k: again_result.report[k] for k in stable} == {k: replayed.report[k] for k in stable}


@pytest.mark.anyio
async def test_a_stream_that_fails_before_text_is_retried_and_resumes_without_a_model_call(tmp_path: Path) -> None:
    journal = SQLiteJournal(tmp_path / "j.db")
    model = Breaking([([], True), (["Refund ", "issued."], False)])
    agent = desk(journal, model)
    events = await consume(agent, "charged twice", "s")
    assert texts(events) == ["Refund ", "issued."]
    assert [type(e) for e in events if isinstance(e, (RunFailed, RecoveryRetry))] == [RunFailed, RecoveryRetry]
    result = events[-1].result  # type: ignore[union-attr]
    assert result.status == "ok" and result.output == "Refund issued."
    assert result.usage.requests == 1 and result.usage_by_route["billing"] == USAGE  # the failed try had no usage
    for _ in range(3):  # the failed first try is raised again by every resume, never called live
        replayed = await agent.resume("s")
        assert model.calls == 2
        assert (replayed.status, replayed.output, replayed.usage) == (result.status, result.output, result.usage)
        # the latest attempt's stream is the run's: the failed try and its retry too, not only the answer
        assert [e.kind for e in await recorded_events(journal, "s")] == [e.kind for e in events]


@pytest.mark.anyio
async def test_resuming_a_run_that_recovered_replays_its_failed_attempt_and_retry_events(tmp_path: Path) -> None:
    journal = SQLiteJournal(tmp_path / "j.db")
    model = Breaking([([], True), (["Refund ", "issued."], False)])
    agent = desk(journal, model)
    events = await consume(agent, "charged twice", "s")
    await agent.resume("s")
    assert model.calls == 2  # the resume called nothing
    # the resumed attempt's recorded stream is the run's: the failed try, the retry, then the answer
    replayed = await recorded_events(journal, "s")
    kinds = [e.kind for e in replayed]
    assert kinds == [e.kind for e in events]
    assert kinds.count("run.failed") == 1 and kinds.count("recovery.retry") == 1
    assert [e.text for e in replayed if isinstance(e, TextDelta)] == ["Refund ", "issued."]


@pytest.mark.anyio
async def test_a_run_whose_retries_ran_out_resumes_to_the_same_report_without_a_call(tmp_path: Path) -> None:
    journal = SQLiteJournal(tmp_path / "j.db")
    model = ScriptedModel([TimeoutError("slow"), TimeoutError("slow"), TimeoutError("slow"), "late"])
    agent = desk(journal, model)
    first = await agent.run("charged twice", session_id="s")
    assert first.status == "critical" and first.report["reason"] == "retries_exhausted"
    assert len(model.requests) == 3
    replayed = await agent.resume("s")
    assert len(model.requests) == 3
    assert replayed.status == "critical" and replayed.report["reason"] == "retries_exhausted"
    assert replayed.report["error"] == first.report["error"] == {"type": "TimeoutError"}
    assert replayed.report["attempts"] == first.report["attempts"]


@pytest.mark.anyio
async def test_an_unfinished_run_with_a_recorded_failure_resumes_live(tmp_path: Path) -> None:
    journal = SQLiteJournal(tmp_path / "j.db")
    model = Breaking([([], True), (["Recovered."], False)])
    agent = desk(journal, model)
    stream = agent.stream("charged twice", session_id="s")
    async for ev in stream:
        if isinstance(ev, RecoveryRetry):
            break  # the process "dies" during the backoff: the failure is recorded, the run never ends
    await stream.aclose()
    assert model.calls == 1
    result = await agent.resume("s")
    assert model.calls == 2  # a failure is replayed only for a run that completed on it
    assert result.status == "ok" and result.output == "Recovered."


@pytest.mark.anyio
async def test_a_failed_run_without_recovery_is_resumed_live(tmp_path: Path) -> None:
    journal = SQLiteJournal(tmp_path / "j.db")
    model = ScriptedModel([ModelError("down", severity="critical"), "Back up."])
    agent = Agent("Billing.", name="billing", model=model, runtime=JournalRuntime(journal))
    with pytest.raises(ModelError, match="down"):
        await agent.run("hi", session_id="s")
    result = await agent.resume("s")  # a failed run is unfinished: resume runs it again
    assert result.output == "Back up." and len(model.requests) == 2


class FailingClassifier:
    def __init__(self) -> None:
        self.calls = 0

    async def classify(self, request: ClassifyRequest) -> ClassifyResult:
        self.calls += 1
        raise ValueError("classifier broke")


@pytest.mark.anyio
async def test_a_classifier_failure_resumes_to_the_same_report_without_classifying(tmp_path: Path) -> None:
    classifier = FailingClassifier()
    billing = Agent("Billing.", name="billing", model=ScriptedModel([]))
    router = Router([RouterRoute("billing", billing)], classifier=classifier, recovery=Recovery(sleep=RecordedSleeps()))
    agent = Agent("Desk", name="desk", runtime=JournalRuntime(SQLiteJournal(tmp_path / "j.db")), architecture=router)
    first = await agent.run("x", session_id="s")
    assert first.status == "critical" and classifier.calls == 1
    replayed = await agent.resume("s")
    assert classifier.calls == 1
    assert replayed.status == "critical" and replayed.report["error"]["type"] == "ValueError"


@pytest.mark.anyio
async def test_a_failed_capability_with_a_side_effect_is_not_run_again_by_resume(tmp_path: Path) -> None:
    from tests.test_capabilities import Brain, plan

    charges: list[str] = []

    async def charge(call: CapabilityCall) -> str:
        charges.append(call.task)
        raise RuntimeError("card network answered garbage after charging")

    brain = Brain(yes={"charge"}, plans=[plan("charge")])
    arch = Capabilities([Capability("charge", charge, "charges cards")], recovery=Recovery(sleep=RecordedSleeps()))
    journal = SQLiteJournal(tmp_path / "j.db")
    agent = Agent("O", name="desk", model=brain.model, architecture=arch, runtime=JournalRuntime(journal))
    first = await agent.run("charge $5", session_id="s")
    assert first.status == "critical" and charges == ["do charge"]
    replayed = await agent.resume("s")
    assert charges == ["do charge"]  # not charged again
    assert replayed.status == "critical" and replayed.report["error"]["type"] == "RuntimeError"


# -- the adapter's retries under the ladder, with a journal -------------------------------

POLICY = RetryPolicy(max_attempts=3, initial_delay_s=0.5, multiplier=2.0, max_delay_s=5.0, jitter=0.0)


def wire_desk(server: LoopbackServer, journal: SQLiteJournal, sleeps: RecordedSleeps) -> Agent:
    model = OpenAIModel("gpt-4.1-mini", client=server.openai_client(), retry=POLICY, sleep=sleeps, rng=random.Random(0))
    return desk(journal, model)


@pytest.mark.anyio
async def test_adapter_retries_under_the_ladder_stay_within_the_policy_and_resume_offline(
    loopback: LoopbackServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    loopback.script(Status(429), Status(503), Reply(text=["Refund ", "issued."]))
    sleeps = RecordedSleeps()
    agent = wire_desk(loopback, SQLiteJournal(tmp_path / "j.db"), sleeps)
    events = await consume(agent, "charged twice", "s")
    assert len(loopback.requests) == POLICY.max_attempts  # the adapter's three; the ladder adds none
    assert texts(events) == ["Refund ", "issued."]
    assert not [e for e in events if isinstance(e, (RecoveryRetry, RunFailed))]  # retried inside the adapter
    assert sleeps.delays == [0.5, 1.0]
    result = events[-1].result  # type: ignore[union-attr]
    # every request sent counts, the two the server refused included (as the provider counts them)
    assert result.output == "Refund issued." and result.usage_by_route["billing"].requests == POLICY.max_attempts
    replayed = await agent.resume("s")
    assert len(loopback.requests) == POLICY.max_attempts and replayed.output == result.output
    assert replayed.usage == result.usage


@pytest.mark.anyio
async def test_a_wire_stream_that_breaks_after_text_is_not_retried_and_resumes_offline(
    loopback: LoopbackServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    loopback.script(Reply(text=["Refund ", "iss", "ued."], disconnect_after=3), Reply(text=["again"]))
    agent = wire_desk(loopback, SQLiteJournal(tmp_path / "j.db"), RecordedSleeps())
    events = await consume(agent, "charged twice", "s")
    assert len(loopback.requests) == 1
    assert [e for e in events if isinstance(e, RecoveryReport)]
    first = events[-1].result  # type: ignore[union-attr]
    assert first.status == "critical"
    replayed = await agent.resume("s")
    assert len(loopback.requests) == 1  # the interruption is replayed, not re-requested
    assert replayed.status == "critical" and replayed.report["error"]["type"] == "StreamInterrupted"


# -- a retried specialist over a journal: its completed steps are not paid twice -------------


def refund_desk(journal: SQLiteJournal | None, refunds: list[str], *, timeouts: int = 1) -> tuple[Agent, FunctionModel]:
    """A Router whose billing agent refunds, then its next model call times out ``timeouts`` times."""
    from jeeves_router import tool
    from jeeves_router.testing import Call, Reply

    @tool
    def refund(invoice: str) -> str:
        """Refund an invoice."""
        refunds.append(invoice)
        return f"refunded {invoice}"

    failures = [TimeoutError("read timed out")] * timeouts

    def answer(request: ModelRequest) -> Reply:
        if request.messages[-1].role == "tool":
            if failures:
                raise failures.pop()
            return Reply(text="Refunded INV-7.", usage=USAGE)
        return Reply(calls=[Call("refund", {"invoice": "INV-7"})], usage=USAGE)

    model = FunctionModel(answer, name="billing")
    billing = Agent("Billing.", name="billing", model=model, tools=[refund])
    router = Router(
        [RouterRoute("billing", billing), RouterRoute("general", Agent("G.", name="general", model=ScriptedModel([])))],
        classifier=StaticClassifier("billing"),
        recovery=Recovery(sleep=RecordedSleeps()),
    )
    runtime = JournalRuntime(journal) if journal is not None else None
    return Agent("Desk", name="desk", runtime=runtime, architecture=router), model


@pytest.mark.anyio
@pytest.mark.parametrize("journaled", [False, True])
async def test_a_retried_specialist_counts_each_model_response_once(tmp_path: Path, journaled: bool) -> None:
    refunds: list[str] = []
    agent, model = refund_desk(SQLiteJournal(tmp_path / "j.db") if journaled else None, refunds)
    result = await agent.run("refund INV-7", session_id="s")
    assert result.output == "Refunded INV-7." and refunds == ["INV-7"]
    answered = len(model.requests) - 1  # every request but the one that timed out returned a response
    # with a journal the retry takes the first call from the journal instead of the model
    assert answered == (2 if journaled else 3)
    # each request sent counts once: the answered ones and the one that timed out
    assert result.usage.requests == result.usage_by_route["billing"].requests == len(model.requests)
    assert result.usage.input_tokens == answered * USAGE.input_tokens  # the timeout reported no tokens
    if journaled:
        replayed = await agent.resume("s")
        assert len(model.requests) == answered + 1 and refunds == ["INV-7"]
        assert (replayed.output, replayed.usage) == (result.output, result.usage)


class FirstRoute:
    """Picks the first route it is offered (the failed route is no longer offered); records the feedback it saw."""

    def __init__(self) -> None:
        self.feedback: list[str | None] = []

    @property
    def calls(self) -> int:
        """How many classifications it made."""
        return len(self.feedback)

    async def classify(self, request: ClassifyRequest) -> ClassifyResult:
        self.feedback.append(request.feedback)
        return await StaticClassifier(request.routes[0].name, 0.9).classify(request)


class NotMyDesk(Exception):
    """A specialist's way of saying the request belongs elsewhere."""


def reclassify_not_my_desk(exc: BaseException, ctx: object) -> ErrorClassification | None:
    """The billing agent's ``classify_error`` hook: :class:`NotMyDesk` asks for another route."""
    return ErrorClassification(ErrorSeverity.RECLASSIFICATION) if isinstance(exc, NotMyDesk) else None


def reclassifying_desk(
    journal: SQLiteJournal,
    billing_steps: list[object],
    general_steps: list[object],
    hook: Callable[..., ErrorClassification | None] = reclassify_not_my_desk,
) -> tuple[Agent, FirstRoute, ScriptedModel, ScriptedModel]:
    """A billing + general desk whose billing agent judges its failures with ``hook``."""
    billing_model = ScriptedModel(billing_steps, name="billing")  # type: ignore[arg-type]
    general_model = ScriptedModel(general_steps, name="general")  # type: ignore[arg-type]
    billing = Agent("Billing.", name="billing", model=billing_model, classify_error=hook)
    general = Agent("General.", name="general", model=general_model)
    classifier = FirstRoute()
    router = Router(
        [RouterRoute("billing", billing), RouterRoute("general", general)],
        classifier=classifier,
        recovery=Recovery(sleep=RecordedSleeps()),
    )
    agent = Agent("Desk", name="desk", runtime=JournalRuntime(journal), architecture=router)
    return agent, classifier, billing_model, general_model


@pytest.mark.anyio
async def test_a_run_that_reclassified_after_a_failure_resumes_to_the_same_route_without_a_call(
    tmp_path: Path,
) -> None:
    journal = SQLiteJournal(tmp_path / "j.db")
    agent, classifier, _, _ = reclassifying_desk(journal, [NotMyDesk("a general question")], ["General answer."])
    first = await agent.run("what are your hours?", session_id="s")
    assert (first.status, first.route, first.output) == ("ok", "general", "General answer.")
    assert classifier.calls == 2
    fresh, classifier, billing_model, general_model = reclassifying_desk(journal, [], [])
    replayed = await fresh.resume("s")
    assert classifier.calls == 0 and billing_model.requests == [] and general_model.requests == []
    assert (replayed.status, replayed.route, replayed.output) == (first.status, first.route, first.output)


@pytest.mark.anyio
async def test_resuming_a_run_whose_retries_ran_out_does_not_wait_the_backoffs_again(tmp_path: Path) -> None:
    journal = SQLiteJournal(tmp_path / "j.db")
    sleeps = RecordedSleeps()
    billing = Agent("Billing.", name="billing", model=ScriptedModel([TimeoutError("slow")] * 3))
    router = Router(
        [RouterRoute("billing", billing)], classifier=StaticClassifier("billing"), recovery=Recovery(sleep=sleeps)
    )
    agent = Agent("Desk", name="desk", runtime=JournalRuntime(journal), architecture=router)
    first = await agent.run("charged twice", session_id="s")
    assert first.status == "critical" and len(sleeps.delays) == 2
    replayed = await agent.resume("s")
    assert replayed.report["reason"] == first.report["reason"] == "retries_exhausted"
    assert len(sleeps.delays) == 2  # the replayed failures are not waited for again


@pytest.mark.anyio
async def test_a_resumed_run_whose_retries_ran_out_after_a_tool_call_reports_the_same_usage(tmp_path: Path) -> None:
    refunds: list[str] = []
    agent, _ = refund_desk(SQLiteJournal(tmp_path / "j.db"), refunds, timeouts=3)
    first = await agent.run("refund INV-7", session_id="s")
    assert first.status == "critical" and refunds == ["INV-7"]
    # the refund call, made once (the retries took it from the journal), and the three that timed out
    assert first.usage.requests == 4
    replayed = await agent.resume("s")
    assert refunds == ["INV-7"]
    assert (replayed.status, replayed.usage, replayed.usage_by_route) == (
        first.status,
        first.usage,
        first.usage_by_route,
    )
