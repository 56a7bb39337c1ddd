"""One Router: the same sticky sessions, context, hand-back, handoff guards and decisions for every classifier.

Each test runs once per way of classifying: the LLM text classifier (the router agent's
model answers ``route: ... / confidence: ...``), the tool-call classifier (the model calls
``classify_as_<route>``) and a custom classifier (as an embedded or cascade one plugs in).
Each is scripted with the same decisions, and the runs must come out the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from pydantic import BaseModel

from jeeves_router import Agent, HandoffRouter, Router, RouterRoute, UsageError
from jeeves_router.classify.toolcall import ToolCallClassifier
from jeeves_router.classify.types import Classification, ClassifyRequest, ClassifyResult
from jeeves_router.events import (
    Event,
    HandoffCompleted,
    HandoffRejected,
    RecoveryReclassify,
    RouterClassified,
    RouterDispatched,
    RunCompleted,
)
from jeeves_router.journal import JournalRuntime, MemoryJournal
from jeeves_router.recovery import ErrorClassification, ErrorContext, ErrorSeverity, Recovery
from jeeves_router.runtime import Runtime
from jeeves_router.testing import Call, RecordedSleeps, ScriptedModel, capture_events

KINDS = ["llm_text", "tool_call", "custom"]
Decision = tuple[str, float]


class ListClassifier:
    """A custom classifier answering from a list of decisions (the way an embedded one plugs in)."""

    def __init__(self, decisions: Sequence[Decision]) -> None:
        self.decisions = list(decisions)
        self.requests: list[ClassifyRequest] = []

    async def classify(self, request: ClassifyRequest) -> ClassifyResult:
        self.requests.append(request)
        route, confidence = self.decisions.pop(0)
        return ClassifyResult(Classification(route, confidence, "ok", f"custom:{route}"))


def router_for(
    kind: str, decisions: Sequence[Decision], routes: list[RouterRoute], **options: Any
) -> tuple[Router, ScriptedModel]:
    """A Router deciding ``decisions`` in turn with the ``kind`` of classifier, and the router agent's model."""
    if kind == "llm_text":
        # a malformed confidence is re-asked once (a format retry): script each answer twice
        replies = [f"route: {r}\nconfidence: {c}" for r, c in decisions for _ in range(1 if 0 <= c <= 1 else 2)]
        return Router(routes, **options), ScriptedModel(replies, name="router")
    if kind == "tool_call":
        calls = [Call(f"classify_as_{r}", {"reason": "fits", "confidence": c}) for r, c in decisions]
        classifier = ToolCallClassifier(ScriptedModel(calls, name="router"))
        return Router(routes, classifier=classifier, **options), ScriptedModel([], name="unused")
    return Router(routes, classifier=ListClassifier(decisions), **options), ScriptedModel([], name="unused")


def desk(
    kind: str,
    decisions: Sequence[Decision],
    *,
    billing: Sequence[Any] = (),
    technical: Sequence[Any] = (),
    general: Sequence[Any] = (),
    billing_handoffs: Sequence[Any] = (),
    technical_handoffs: Sequence[Any] = (),
    runtime: Runtime | None = None,
    billing_hook: Any = None,
    **options: Any,
) -> tuple[Agent, dict[str, ScriptedModel]]:
    models = {
        "billing": ScriptedModel(list(billing), name="billing"),
        "technical": ScriptedModel(list(technical), name="technical"),
        "general": ScriptedModel(list(general), name="general"),
    }
    extra: dict[str, Any] = {"runtime": runtime} if runtime is not None else {}
    agents = {
        "billing": Agent("Payments.", name="billing", model=models["billing"], handoffs=billing_handoffs, **extra),
        "technical": Agent("APIs.", name="technical", model=models["technical"], handoffs=technical_handoffs, **extra),
        "general": Agent("Anything.", name="general", model=models["general"], **extra),
    }
    routes = [
        RouterRoute("billing", agents["billing"], "payments", classify_error=billing_hook),
        RouterRoute("technical", agents["technical"], "API errors"),
        RouterRoute("general", agents["general"], "anything else"),
    ]
    options.setdefault("fallback_route", "general")
    router, model = router_for(kind, decisions, routes, **options)
    models["router"] = model
    return Agent("Support desk.", name="desk", model=model, architecture=router, **extra), models


def of(events: list[Event], cls: type[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, cls)]


def result_of(events: list[Event]) -> Any:
    return of(events, RunCompleted)[-1].result


# -- the decision ---------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("confidence", [1.5, 7.0, -0.5, float("nan"), float("inf")])
async def test_an_out_of_range_confidence_fails_closed_to_the_fallback(kind: str, confidence: float) -> None:
    agent, models = desk(kind, [("billing", confidence)], general=["Hello."])
    events = await capture_events(agent, "x")
    result = result_of(events)
    assert (result.route, result.status, result.fallback_reason) == ("general", "fallback", "invalid_confidence")
    assert result.confidence is None and models["billing"].requests == []
    [classified] = of(events, RouterClassified)  # reported alike, whichever classifier it was
    assert (classified.status, classified.route, classified.requested, classified.confidence) == (
        "invalid_confidence",
        None,
        "billing",
        0.0,
    )


@pytest.mark.anyio
@pytest.mark.parametrize("kind", KINDS)
async def test_below_the_threshold_goes_to_the_fallback(kind: str) -> None:
    agent, _ = desk(kind, [("billing", 0.3)], general=["Hello."], require_confidence_above=0.6)
    result = await agent.run("x")
    assert (result.route, result.status, result.fallback_reason, result.confidence) == (
        "general",
        "fallback",
        "low_confidence",
        0.3,
    )
    agent, _ = desk(kind, [("billing", 0.3)], require_confidence_above=0.6, fallback_route=None)
    result = await agent.run("x")
    assert (result.status, result.output, result.fallback_reason) == ("unresolved", None, "low_confidence")


# -- sticky sessions --------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("kind", KINDS)
async def test_a_sticky_follow_up_skips_classification_until_reset(kind: str) -> None:
    agent, _ = desk(
        kind,
        [("billing", 0.9), ("technical", 0.9)],
        billing=["Refunded.", "You're welcome."],
        technical=["Fixed."],
        sticky=True,
    )
    first = await capture_events(agent, "charged twice", session_id="s")
    second = await capture_events(agent, "thanks", session_id="s")
    assert len(of(first, RouterClassified)) == 1 and of(second, RouterClassified) == []
    assert result_of(second).route == "billing" and result_of(second).output == "You're welcome."
    assert result_of(second).metadata["sticky"] is True
    sticky = of(second, HandoffCompleted)
    assert [(h.to_agent, h.sticky) for h in sticky] == [("billing", True)]
    router = agent.architecture
    assert isinstance(router, Router)
    await router.reset("s")
    third = await capture_events(agent, "the API is down", session_id="s")
    assert len(of(third, RouterClassified)) == 1 and result_of(third).route == "technical"


@pytest.mark.anyio
@pytest.mark.parametrize("kind", KINDS)
async def test_resuming_a_completed_sticky_session_calls_nothing(kind: str) -> None:
    journal = MemoryJournal()
    decisions = [("billing", 0.9)]
    live, _ = desk(kind, decisions, billing=["Refunded.", "In 3 days."], runtime=JournalRuntime(journal), sticky=True)
    r1 = await live.run("charged twice", session_id="h")
    r2 = await live.run("when?", session_id="h", history=r1.messages)
    assert r2.metadata["sticky"] is True
    # a new process: a fresh session store, classifiers and models that fail if called
    replay, models = desk(kind, [], runtime=JournalRuntime(journal), sticky=True)
    result = await replay.resume("h")
    assert (result.output, result.route) == ("In 3 days.", "billing")
    assert all(m.requests == [] for m in models.values())


# -- typed context --------------------------------------------------------------------------------


class Customer(BaseModel):
    plan: str
    seats: int = 1


@pytest.mark.anyio
@pytest.mark.parametrize("kind", KINDS)
async def test_context_schema_validates_before_any_call(kind: str) -> None:
    agent, models = desk(kind, [("billing", 0.9)], billing=["ok"], context_schema=Customer)
    with pytest.raises(UsageError, match="Customer"):
        await agent.run("x", context={"seats": 2})
    assert all(m.requests == [] for m in models.values())
    result = await agent.run("x", context={"plan": "pro", "seats": "3"})
    assert result.route == "billing"
    router = agent.architecture
    assert isinstance(router, Router)
    classifier = router.classifier_for(agent)
    if isinstance(classifier, ListClassifier):
        assert dict(classifier.requests[0].context) == {"plan": "pro", "seats": 3}  # the validated values


# -- handoffs after dispatch --------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("kind", KINDS)
async def test_a_hand_back_is_classified_again_by_the_same_classifier(kind: str) -> None:
    agent, models = desk(
        kind,
        [("billing", 0.9), ("technical", 0.8)],
        billing=[Call("transfer_to_desk", {"reason": "not a billing question"})],
        technical=["Fixed."],
        hand_back=True,
    )
    events = await capture_events(agent, "charged twice and the API is down", session_id="s")
    result = result_of(events)
    assert (result.route, result.output, result.confidence) == ("technical", "Fixed.", 0.8)
    assert [c.route for c in of(events, RouterClassified)] == ["billing", "technical"]
    assert [d.route for d in of(events, RouterDispatched)] == ["billing", "technical"]
    assert [(h.from_agent, h.to_agent) for h in of(events, HandoffCompleted)] == [("billing", "desk")]
    assert result.metadata["handoffs"][1] == {"from": "billing", "to": "desk", "reason": "not a billing question"}
    assert set(result.usage_by_route) == {"<classifier>", "billing", "technical"}
    assert {t.name for t in models["billing"].requests[0].tools} == {"transfer_to_desk"}


@pytest.mark.anyio
@pytest.mark.parametrize("kind", KINDS)
async def test_a_specialist_handoff_chain_respects_max_handoffs(kind: str) -> None:
    ping = Call("transfer_to_technical", {"reason": "API"})
    pong = Call("transfer_to_billing", {"reason": "money"})
    agent, _ = desk(
        kind,
        [("billing", 0.9)],
        billing=[ping, ping],
        technical=[pong, pong],
        billing_handoffs=["technical"],
        technical_handoffs=["billing"],
        max_handoffs=3,
    )
    events = await capture_events(agent, "x")
    result = result_of(events)
    assert (result.status, result.output, result.route) == ("handoff_limit", None, None)
    assert [h["to"] for h in result.metadata["handoffs"]] == ["billing", "technical", "billing"]
    [rejected] = of(events, HandoffRejected)
    assert rejected.why == "limit" and "max_handoffs=3" in (rejected.reason or "")


@pytest.mark.anyio
@pytest.mark.parametrize("kind", KINDS)
async def test_the_history_mode_applies_to_routed_specialists(kind: str) -> None:
    from jeeves_router.messages import assistant, user

    agent, models = desk(kind, [("billing", 0.9)], billing=["ok"], history="last")
    await agent.run("refund please", history=[user("hi"), assistant("hello")])
    assert [m.text for m in models["billing"].requests[0].messages] == ["refund please"]


# -- recovery on a sticky turn --------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("kind", KINDS)
async def test_a_sticky_specialist_that_fails_is_reclassified_without_its_route(kind: str) -> None:
    def hook(exc: BaseException, ctx: ErrorContext) -> ErrorClassification | None:
        return ErrorClassification(ErrorSeverity.RECLASSIFICATION, "not a billing question")

    agent, _ = desk(
        kind,
        [("billing", 0.9), ("general", 0.9)],
        billing=["Refunded.", RuntimeError("wrong desk")],
        general=["Here you go."],
        sticky=True,
        recovery=Recovery(sleep=RecordedSleeps()),
        billing_hook=hook,
    )
    await agent.run("charged twice", session_id="s")
    events = await capture_events(agent, "and the hours?", session_id="s")
    result = result_of(events)
    assert (result.status, result.route, result.output) == ("ok", "general", "Here you go.")
    assert result.metadata["excluded_routes"] == ("billing",)
    assert result.metadata["sticky"] is False  # the answer came from a new classification, not the sticky route
    [re] = of(events, RecoveryReclassify)
    assert re.excluded == ("billing",)
    assert of(events, RouterClassified)[0].route == "general"
    # the session now sticks to the route that answered
    router = agent.architecture
    assert isinstance(router, Router) and router.settings.store is not None
    assert await router.settings.store.get("s") == "general"


@pytest.mark.anyio
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("recovery", [False, True])
async def test_a_sticky_turn_that_fails_forgets_the_sticky_agent(kind: str, recovery: bool) -> None:
    # Like an unresolved turn: the next turn is classified afresh instead of going back to the
    # agent that just failed (an error without recovery, or a recovery stop: CRITICAL here).
    def critical(exc: BaseException, ctx: ErrorContext) -> ErrorClassification | None:
        return ErrorClassification(ErrorSeverity.CRITICAL, "the payment system is down")

    options: dict[str, Any] = (
        {"recovery": Recovery(sleep=RecordedSleeps()), "billing_hook": critical} if recovery else {}
    )
    agent, models = desk(
        kind,
        [("billing", 0.9), ("general", 0.9)],
        billing=["Refunded.", RuntimeError("payments down")],
        general=["Here you go."],
        sticky=True,
        **options,
    )
    await agent.run("charged twice", session_id="s")
    router = agent.architecture
    assert isinstance(router, Router) and router.settings.store is not None
    assert await router.settings.store.get("s") == "billing"
    if recovery:
        failed = await agent.run("and my refund?", session_id="s")
        assert (failed.status, failed.output) == ("critical", None)
    else:
        with pytest.raises(RuntimeError, match="payments down"):
            await agent.run("and my refund?", session_id="s")
    assert await router.settings.store.get("s") is None
    events = await capture_events(agent, "when are you open?", session_id="s")
    assert [c.route for c in of(events, RouterClassified)] == ["general"]
    assert result_of(events).output == "Here you go."
    assert len(models["billing"].requests) == 2


# -- the preset -----------------------------------------------------------------------------------------


def test_handoff_router_is_a_router_preset() -> None:
    billing = Agent("b", name="billing", model=ScriptedModel([]))
    preset = HandoffRouter([RouterRoute("billing", billing)])
    assert isinstance(preset, Router)
    assert (preset.sticky, preset.hand_back) == (True, True)
    assert type(preset).run is Router.run
    agent = Agent("Desk.", name="desk", model=ScriptedModel([]), architecture=preset)
    assert isinstance(preset.classifier_for(agent), ToolCallClassifier)
