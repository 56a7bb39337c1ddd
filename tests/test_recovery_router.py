"""The recovery ladder driven end to end through Router and ToolLoop with failing scripted models."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from jeeves_router import Agent, Router, RouterRoute
from jeeves_router.architectures.react import ToolLoop
from jeeves_router.errors import ModelError
from jeeves_router.events import (
    Event,
    RecoveryReclassify,
    RecoveryReport,
    RecoveryRetry,
    RunFailed,
    TextDelta,
)
from jeeves_router.models.base import ModelRequest, ModelResponse, ModelStreamItem, ModelTextDelta
from jeeves_router.policies import RetryPolicy
from jeeves_router.recovery import ErrorClassification, ErrorContext, ErrorSeverity, ExecutionError, Recovery
from jeeves_router.testing import Call, FunctionModel, RecordedSleeps, ScriptedModel, capture_events
from jeeves_router.tools import tool
from tests.recovery_clock import Clock

ROUTE = "route: billing\nconfidence: 0.9"


class TextThenFail:
    """Streams one delta, then fails (a mid-stream failure after text reached the consumer)."""

    name = "test:text-then-fail"

    def __init__(self) -> None:
        self.calls = 0

    async def request(self, request: ModelRequest) -> ModelResponse:  # pragma: no cover - not used
        raise NotImplementedError

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        self.calls += 1
        yield ModelTextDelta("partial ")
        raise TimeoutError("connection dropped")


def desk(
    classifier: ScriptedModel,
    billing: Any,
    general: Any = None,
    *,
    recovery: Recovery | None = None,
    billing_hook: Any = None,
    billing_policy: RetryPolicy | None = None,
) -> Agent:
    b = billing if isinstance(billing, Agent) else Agent("Billing.", name="billing", model=billing)
    g = general if isinstance(general, Agent) else Agent("General.", name="general", model=general or ScriptedModel([]))
    routes = [
        RouterRoute("billing", b, "payments", classify_error=billing_hook, retry_policy=billing_policy),
        RouterRoute("general", g, "anything else"),
        RouterRoute("tech", Agent("Tech.", name="tech", model=ScriptedModel([])), "bugs"),
    ]
    return Agent("Desk", name="desk", model=classifier, architecture=Router(routes, recovery=recovery))


def kinds(events: list[Event], cls: type) -> list[Any]:
    return [e for e in events if isinstance(e, cls)]


@pytest.mark.anyio
async def test_without_recovery_a_specialist_error_keeps_its_type() -> None:
    billing = ScriptedModel([RuntimeError("boom")])
    classifier = ScriptedModel([ROUTE])
    with pytest.raises(RuntimeError, match="boom"):
        await desk(classifier, billing).run("charged twice")
    assert len(billing.requests) == 1 and len(classifier.requests) == 1


@pytest.mark.anyio
async def test_retriable_classifier_failure_is_retried_under_the_framework_policy() -> None:
    sleeps = RecordedSleeps()
    classifier = ScriptedModel([ModelError("overloaded", severity="retriable"), ROUTE])
    billing = ScriptedModel(["Refunded."])
    events = await capture_events(desk(classifier, billing, recovery=Recovery(sleep=sleeps)), "charged twice")
    result = events[-1].result  # type: ignore[union-attr]
    assert result.status == "ok" and result.output == "Refunded."
    assert len(classifier.requests) == 2 and len(billing.requests) == 1
    assert sleeps.delays == [0.2]
    [retry] = kinds(events, RecoveryRetry)
    assert (retry.operation, retry.attempt, retry.delay_s, retry.severity) == ("classify", 2, 0.2, "retriable")


@pytest.mark.anyio
async def test_classifier_retries_exhausted_end_critical() -> None:
    sleeps = RecordedSleeps()
    classifier = ScriptedModel([ModelError("a", severity="retriable"), ModelError("b", severity="retriable")])
    result = await desk(classifier, ScriptedModel([]), recovery=Recovery(sleep=sleeps)).run("x")
    assert result.status == "critical" and result.output is None and result.confidence is None
    assert len(classifier.requests) == 2 and sleeps.delays == [0.2]
    assert result.report is not None and result.report["operation"] == "classify"
    assert result.report["reason"] == "retries_exhausted"


@pytest.mark.anyio
async def test_retriable_specialist_is_dispatched_again_with_backoff() -> None:
    sleeps = RecordedSleeps()
    classifier = ScriptedModel([ROUTE])
    billing = ScriptedModel([TimeoutError(), TimeoutError(), "Refunded."])
    events = await capture_events(desk(classifier, billing, recovery=Recovery(sleep=sleeps)), "charged twice")
    result = events[-1].result  # type: ignore[union-attr]
    assert result.status == "ok" and result.output == "Refunded." and result.route == "billing"
    assert len(billing.requests) == 3 and len(classifier.requests) == 1
    assert sleeps.delays == [0.5, 0.75]
    assert [(r.operation, r.attempt) for r in kinds(events, RecoveryRetry)] == [
        ("route:billing", 2),
        ("route:billing", 3),
    ]


@pytest.mark.anyio
async def test_retries_exhausted_give_a_critical_report_result_and_event() -> None:
    sleeps = RecordedSleeps()
    billing = ScriptedModel([TimeoutError("secret-host:5432")] * 3)
    events = await capture_events(desk(ScriptedModel([ROUTE]), billing, recovery=Recovery(sleep=sleeps)), "x")
    result = events[-1].result  # type: ignore[union-attr]
    assert result.status == "critical" and result.route == "billing"
    assert result.confidence == 0.9  # the classification that chose the failed route, as a dispatched result has it
    assert len(billing.requests) == 3 and sleeps.delays == [0.5, 0.75]
    report = result.report
    assert report["attempts"] == {"classify": 1, "route:billing": 3}
    assert report["severity"] == "retriable" and report["reason"] == "retries_exhausted"
    assert [s["ok"] for s in report["steps"]] == [True, False, False, False]
    assert "secret-host" not in report["user_message"] and "secret-host" not in str(report)
    [ev] = kinds(events, RecoveryReport)
    assert ev.report == report and ev.user_message == report["user_message"] and ev.path == ("desk",)


@pytest.mark.anyio
async def test_route_retry_policy_and_hook_turn_recovery_on() -> None:
    billing = ScriptedModel([TimeoutError()])
    agent = desk(ScriptedModel([ROUTE]), billing, billing_policy=RetryPolicy(max_attempts=1))
    result = await agent.run("x")
    assert result.status == "critical" and len(billing.requests) == 1


@pytest.mark.anyio
async def test_reclassification_excludes_the_failed_route_and_shows_the_failure() -> None:
    def hook(exc: BaseException, ctx: ErrorContext) -> ErrorClassification | None:
        assert ctx.route == "billing" and ctx.operation == "route:billing"
        return ErrorClassification(ErrorSeverity.RECLASSIFICATION, "not a billing question")

    classifier = ScriptedModel([ROUTE, "route: general\nconfidence: 0.8"])
    billing = ScriptedModel([RuntimeError("wrong desk")])
    general = ScriptedModel(["Here you go."])
    events = await capture_events(
        desk(classifier, billing, general, recovery=Recovery(sleep=RecordedSleeps()), billing_hook=hook), "x"
    )
    result = events[-1].result  # type: ignore[union-attr]
    assert result.status == "ok" and result.route == "general" and result.output == "Here you go."
    assert len(classifier.requests) == 2 and len(billing.requests) == 1 and len(general.requests) == 1
    second = classifier.requests[1]
    assert "billing" not in (second.system or "") and "general" in (second.system or "")
    assert "not a billing question" in second.messages[-1].text and "billing failed" in second.messages[-1].text
    [re] = kinds(events, RecoveryReclassify)
    assert re.excluded == ("billing",) and re.attempt == 1
    assert result.metadata["excluded_routes"] == ("billing",)


@pytest.mark.anyio
async def test_reclassifications_are_bounded() -> None:
    reclassify = ErrorClassification(ErrorSeverity.RECLASSIFICATION)
    classifier = ScriptedModel([ROUTE, "route: general\nconfidence: 0.8"])
    billing = ScriptedModel([ExecutionError("reclassification", "no")])
    general = ScriptedModel([ExecutionError(reclassify.severity, "no either")])
    result = await desk(classifier, billing, general, recovery=Recovery(sleep=RecordedSleeps())).run("x")
    assert result.status == "critical" and result.report["reason"] == "reclassifications_exhausted"
    assert len(classifier.requests) == 2 and len(billing.requests) == 1 and len(general.requests) == 1


@pytest.mark.anyio
async def test_fatal_aborts_at_once_with_the_original_exception() -> None:
    billing = ScriptedModel([ExecutionError(ErrorSeverity.FATAL, "credentials revoked")])
    agent = desk(ScriptedModel([ROUTE]), billing, recovery=Recovery(sleep=RecordedSleeps()))
    with pytest.raises(ExecutionError, match="credentials revoked"):
        await agent.run("x")
    assert len(billing.requests) == 1
    events: list[Event] = []
    with pytest.raises(ExecutionError, match="again"):
        async for ev in desk(
            ScriptedModel([ROUTE]), ScriptedModel([ExecutionError("fatal", "again")]), recovery=Recovery()
        ).stream("x"):
            events.append(ev)
    assert [e.path for e in kinds(events, RunFailed)] == [("desk", "billing"), ("desk",)]
    assert not kinds(events, RecoveryReport)


@pytest.mark.anyio
async def test_fatal_inside_a_recovering_specialist_stays_fatal_in_the_router() -> None:
    soften = ErrorClassification(ErrorSeverity.RETRIABLE)
    inner = Agent(
        "Billing.",
        name="billing",
        model=ScriptedModel([ExecutionError("fatal", "stop")]),
        architecture=ToolLoop(recovery=Recovery(sleep=RecordedSleeps())),
    )
    agent = desk(
        ScriptedModel([ROUTE]), inner, recovery=Recovery(sleep=RecordedSleeps()), billing_hook=lambda e, c: soften
    )
    with pytest.raises(ExecutionError):
        await agent.run("x")


@pytest.mark.anyio
async def test_a_raising_hook_is_critical_with_both_exceptions_in_the_report() -> None:
    def broken(exc: BaseException, ctx: ErrorContext) -> ErrorClassification | None:
        raise KeyError("hook bug")

    billing = ScriptedModel([TimeoutError()])
    result = await desk(
        ScriptedModel([ROUTE]), billing, recovery=Recovery(sleep=RecordedSleeps()), billing_hook=broken
    ).run("x")
    assert result.status == "critical" and len(billing.requests) == 1
    assert result.report["error"] == {"type": "TimeoutError", "hook_error_type": "KeyError"}


@pytest.mark.anyio
async def test_development_flag_reraises_the_original_exception() -> None:
    billing = ScriptedModel([TimeoutError("t1"), TimeoutError("t2")])
    agent = desk(
        ScriptedModel([ROUTE]),
        billing,
        recovery=Recovery(sleep=RecordedSleeps(), reraise=True, retry_policy=RetryPolicy(max_attempts=2)),
    )
    with pytest.raises(TimeoutError, match="t2"):
        await agent.run("x")
    assert len(billing.requests) == 2


@pytest.mark.anyio
async def test_a_specialist_that_streamed_text_is_not_dispatched_again() -> None:
    model = TextThenFail()
    events = await capture_events(desk(ScriptedModel([ROUTE]), model, recovery=Recovery(sleep=RecordedSleeps())), "x")
    assert model.calls == 1
    assert [e.text for e in kinds(events, TextDelta)] == ["partial "]
    result = events[-1].result  # type: ignore[union-attr]
    assert result.status == "critical" and result.report["reason"] == "output_started"


@pytest.mark.anyio
async def test_tool_loop_retries_a_stream_only_before_its_text() -> None:
    sleeps = RecordedSleeps()
    model = ScriptedModel([ModelError("busy", severity="retriable"), "Hello."])
    agent = Agent("a", name="solo", model=model, architecture=ToolLoop(recovery=Recovery(sleep=sleeps)))
    events = await capture_events(agent, "hi")
    assert [e.text for e in kinds(events, TextDelta)] == ["Hello."]
    assert len(model.requests) == 2 and sleeps.delays == [0.5]
    broken = TextThenFail()
    agent = Agent("a", name="solo", model=broken, architecture=ToolLoop(recovery=Recovery(sleep=sleeps)))
    events = await capture_events(agent, "hi")
    assert broken.calls == 1 and [e.text for e in kinds(events, TextDelta)] == ["partial "]
    assert events[-1].result.status == "critical"  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_tool_loop_inside_a_router_escalates_reclassification() -> None:
    def hook(exc: BaseException, ctx: ErrorContext) -> ErrorClassification | None:
        return ErrorClassification(ErrorSeverity.RECLASSIFICATION) if isinstance(exc, LookupError) else None

    billing = Agent("Billing.", name="billing", model=ScriptedModel([LookupError("no invoice")]), classify_error=hook)
    classifier = ScriptedModel([ROUTE, "route: general\nconfidence: 0.7"])
    general = ScriptedModel(["General answer."])
    result = await desk(classifier, billing, general, recovery=Recovery(sleep=RecordedSleeps())).run("x")
    assert result.status == "ok" and result.route == "general" and len(classifier.requests) == 2
    top = Agent("Billing.", name="billing", model=ScriptedModel([LookupError("no invoice")]), classify_error=hook)
    alone = await top.run("x")
    assert alone.status == "critical" and alone.report["reason"] == "reclassify_unavailable"


@pytest.mark.anyio
async def test_tool_infrastructure_failures_are_retried() -> None:
    from jeeves_router.runtime import Runtime, StepKey

    class Flaky(Runtime):
        def __init__(self) -> None:
            self.tool_steps = 0

        async def step(self, key: StepKey, input: Any, fn: Any, *, repeatable: bool = False) -> Any:
            if key.name.startswith("tool:"):
                self.tool_steps += 1
                if self.tool_steps == 1:
                    raise ConnectionError("journal unavailable")
            return await fn()

    @tool
    def lookup(invoice_id: str) -> str:
        """Look up an invoice."""
        return f"invoice {invoice_id}: 42"

    sleeps = RecordedSleeps()
    runtime = Flaky()
    model = ScriptedModel([Call("lookup", {"invoice_id": "A1"}), "It is 42."])
    agent = Agent(
        "a",
        name="solo",
        model=model,
        tools=[lookup],
        runtime=runtime,
        architecture=ToolLoop(recovery=Recovery(sleep=sleeps)),
    )
    events = await capture_events(agent, "how much?")
    assert events[-1].result.output == "It is 42."  # type: ignore[union-attr]
    assert runtime.tool_steps == 2 and sleeps.delays == [0.5] and len(model.requests) == 2
    assert [r.operation for r in kinds(events, RecoveryRetry)] == ["tool:lookup"]


@pytest.mark.anyio
async def test_max_steps_and_time_limit_are_enforced(clock: Clock) -> None:
    billing = ScriptedModel([TimeoutError()] * 3)
    result = await desk(ScriptedModel([ROUTE]), billing, recovery=Recovery(sleep=RecordedSleeps(), max_steps=2)).run(
        "x"
    )
    assert result.status == "critical" and result.report["reason"] == "max_steps" and len(billing.requests) == 1
    sleeps = RecordedSleeps()

    def slow_failure(request: ModelRequest) -> str:
        clock.skipped += 29.8  # the call took the run to 0.2 s before its limit: the 0.5 s backoff would pass it
        raise TimeoutError

    billing = FunctionModel(slow_failure)
    result = await desk(ScriptedModel([ROUTE]), billing, recovery=Recovery(sleep=sleeps, time_limit_s=30.0)).run("x")
    assert result.report["reason"] == "time_limit" and sleeps.delays == [] and len(billing.requests) == 1


@pytest.mark.anyio
async def test_budget_is_checked_when_an_attempt_starts() -> None:
    # max_steps=1: the classification is the only attempt allowed; the dispatch never starts.
    billing = ScriptedModel(["never"])
    result = await desk(ScriptedModel([ROUTE]), billing, recovery=Recovery(max_steps=1)).run("x")
    assert result.status == "critical" and result.report["reason"] == "max_steps"
    assert billing.requests == [] and result.report["error"] == {"type": None}


@pytest.mark.anyio
async def test_explanation_is_added_to_the_report() -> None:
    explainer = ScriptedModel(["Billing is unavailable right now."])
    recovery = Recovery(sleep=RecordedSleeps(), explain_model=explainer, retry_policy=RetryPolicy(max_attempts=1))
    result = await desk(ScriptedModel([ROUTE]), ScriptedModel([TimeoutError()]), recovery=recovery).run("x")
    assert result.report["explanation"] == "Billing is unavailable right now."
    assert "TimeoutError" not in explainer.requests[0].messages[0].text


@pytest.mark.anyio
async def test_forced_route_cannot_reclassify() -> None:
    billing = ScriptedModel([ExecutionError("reclassification", "no")])
    classifier = ScriptedModel([])
    result = await desk(classifier, billing, recovery=Recovery()).run("x", force_route="billing")
    assert result.status == "critical" and result.report["reason"] == "reclassify_unavailable"
    assert classifier.requests == []


@pytest.mark.anyio
async def test_cancelling_during_a_backoff_returns_at_once() -> None:
    billing = ScriptedModel([TimeoutError(), "never reached"])
    recovery = Recovery(retry_policy=RetryPolicy(max_attempts=3, initial_delay_s=30.0))
    agent = desk(ScriptedModel([ROUTE]), billing, recovery=recovery)
    seen: list[Event] = []
    with anyio.CancelScope() as scope:
        async with agent.stream("x") as events:
            async for ev in events:
                seen.append(ev)
                if isinstance(ev, RecoveryRetry):
                    scope.cancel()  # the ladder goes on to wait 30 s: the cancellation ends that wait
    assert scope.cancelled_caught
    assert len(billing.requests) == 1
    assert isinstance(seen[-1], RecoveryRetry) and seen[-1].delay_s == 30.0


def test_router_rejects_a_bad_recovery_object() -> None:
    from jeeves_router.errors import UsageError

    with pytest.raises(UsageError, match="Recovery"):
        Router([RouterRoute("a", Agent("a", name="a", model=ScriptedModel([])))], recovery=3)  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_a_failing_reclassifier_cannot_loop() -> None:
    reclassify = ExecutionError(ErrorSeverity.RECLASSIFICATION, "wrong desk")
    busy = ModelError("busy", severity="retriable")
    classifier = ScriptedModel([ROUTE, busy, ModelError("busy", severity="retriable")])
    billing = ScriptedModel([reclassify])
    sleeps = RecordedSleeps()
    events = await capture_events(desk(classifier, billing, recovery=Recovery(sleep=sleeps)), "x")
    res = events[-1].result  # type: ignore[union-attr]
    assert res.status == "critical" and res.report["operation"] == "classify"
    assert len(classifier.requests) == 3 and len(billing.requests) == 1 and sleeps.delays == [0.2]
    assert res.report["counters"] == {"steps": 4, "reclassifications": 1, "replans": 0}
    assert len(kinds(events, RecoveryReclassify)) == 1


@pytest.mark.anyio
async def test_a_retried_step_replays_from_the_journal_under_the_same_key() -> None:
    from jeeves_router.journal import JournalRuntime, MemoryJournal

    journal = MemoryJournal()
    live = ScriptedModel([ModelError("busy", severity="retriable"), "Hello."])
    agent = Agent(
        "a",
        name="solo",
        model=live,
        runtime=JournalRuntime(journal),
        architecture=ToolLoop(recovery=Recovery(sleep=RecordedSleeps())),
    )
    assert (await agent.run("hi", session_id="r1")).output == "Hello."
    silent = ScriptedModel([])
    again = Agent(
        "a",
        name="solo",
        model=silent,
        runtime=JournalRuntime(journal),
        architecture=ToolLoop(recovery=Recovery(sleep=RecordedSleeps())),
    )
    assert (await again.resume("r1")).output == "Hello."
    assert silent.requests == [] and len(live.requests) == 2
