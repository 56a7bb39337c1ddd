"""Tool-call classification (``classify_as_<route>``) through a real Router: one Router, any classifier."""

from __future__ import annotations

from typing import Any

import pytest

from jeeves_router import Agent, Recovery, Router, RouterRoute
from jeeves_router.classify.toolcall import ToolCallClassifier
from jeeves_router.errors import ModelError
from jeeves_router.events import RecoveryRetry, RouterClassified
from jeeves_router.testing import Call, RecordedSleeps, ScriptedModel, capture_events


def classify(route: str, confidence: Any = 0.9) -> Call:
    return Call(f"classify_as_{route}", {"reason": "fits", "confidence": confidence})


def desk(
    router_steps: list[Any], *, fallback: str | None = "general", on_missing: float | None = None, **router: Any
) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(router_steps, name="router")
    routes = [
        RouterRoute("billing", Agent("Billing.", name="billing", model=ScriptedModel(["Refunded."])), "refunds"),
        RouterRoute("general", Agent("General.", name="general", model=ScriptedModel(["Hello."])), "the rest"),
    ]
    classifier = ToolCallClassifier(model, on_missing_confidence=on_missing)
    arch = Router(routes, classifier=classifier, fallback_route=fallback, **router)
    return Agent("Desk", name="desk", architecture=arch), model


@pytest.mark.anyio
async def test_the_route_comes_from_the_forced_tool_call() -> None:
    agent, model = desk([classify("billing")], require_confidence_above=0.5)
    events = await capture_events(agent, "charged twice")
    result = events[-1].result  # type: ignore[union-attr]
    assert (result.route, result.status, result.confidence) == ("billing", "ok", 0.9)
    [classified] = [e for e in events if isinstance(e, RouterClassified)]
    assert classified.stage == "tool_call" and classified.raw == "tool:classify_as_billing"
    [request] = model.requests
    assert request.tool_choice == "required" and request.purpose == "classify"
    assert [t.name for t in request.tools] == ["classify_as_billing", "classify_as_general"]
    assert result.usage_by_route["<classifier>"].requests == 1


@pytest.mark.parametrize(
    "confidence", [7, -0.1, float("nan"), float("inf"), 10**400, "high", "1.5", "0.7-0.9", True, [0.9]]
)
@pytest.mark.anyio
async def test_an_out_of_range_confidence_goes_to_the_fallback(confidence: Any) -> None:
    agent, model = desk([classify("billing", confidence)])
    result = await agent.run("charged twice")
    assert (result.route, result.status, result.fallback_reason) == ("general", "fallback", "invalid_confidence")
    assert len(model.requests) == 1  # never re-prompted until max_turns


@pytest.mark.parametrize(("confidence", "read"), [("0.9", 0.9), ("85%", 0.85), (" 0.8 ", 0.8), (1, 1.0)])
@pytest.mark.anyio
async def test_a_confidence_sent_as_a_string_is_read_as_a_text_reply_is(confidence: Any, read: float) -> None:
    # Some models put JSON numbers in quotes; the same reader as the text parser's takes them.
    agent, _ = desk([classify("billing", confidence)], require_confidence_above=0.5)
    result = await agent.run("charged twice")
    assert (result.route, result.status, result.confidence) == ("billing", "ok", read)


@pytest.mark.anyio
async def test_below_the_threshold_goes_to_the_fallback() -> None:
    agent, _ = desk([classify("billing", 0.3)], require_confidence_above=0.6)
    result = await agent.run("charged twice")
    assert (result.route, result.fallback_reason) == ("general", "low_confidence")


@pytest.mark.anyio
async def test_no_tool_call_is_corrected_once_then_fails_closed() -> None:
    agent, model = desk(["I think billing.", classify("billing")])
    assert (await agent.run("x")).route == "billing"
    assert len(model.requests) == 2 and "without calling a tool" in model.requests[1].messages[-1].text
    agent, model = desk(["billing", "still billing"], fallback=None)
    result = await agent.run("x")
    assert result.status == "unresolved" and result.fallback_reason == "missing_route"


@pytest.mark.anyio
async def test_an_unknown_tool_is_corrected_with_a_tool_error() -> None:
    agent, model = desk([Call("classify_as_shipping", {"reason": "r", "confidence": 0.9}), classify("general")])
    result = await agent.run("x")
    assert result.route == "general" and result.status == "ok"
    tool_turn = model.requests[1].messages[-1]
    assert tool_turn.role == "tool" and "not one of the tools" in tool_turn.parts[0].content  # type: ignore[union-attr]


BROKEN = Call(
    "classify_as_billing",
    {},
    raw_arguments='{"reason": "refund", "confidence": 0.9',
    argument_error="Expecting ',' delimiter: line 1 column 38",
)


@pytest.mark.parametrize("on_missing", [None, 0.8])
@pytest.mark.anyio
async def test_unreadable_arguments_are_corrected_once_then_fail_closed(on_missing: float | None) -> None:
    # Broken JSON is not "no confidence given": on_missing_confidence never stands in for it.
    agent, model = desk([BROKEN, classify("billing", 0.7)], on_missing=on_missing)
    result = await agent.run("charged twice")
    assert (result.route, result.status, result.confidence) == ("billing", "ok", 0.7)
    assert len(model.requests) == 2 and result.usage_by_route["<classifier>"].requests == 2
    tool_turn = model.requests[1].messages[-1]
    assert tool_turn.role == "tool" and tool_turn.parts[0].is_error  # type: ignore[union-attr]
    assert "not a valid JSON object" in tool_turn.parts[0].content  # type: ignore[union-attr]
    agent, model = desk([BROKEN, BROKEN], on_missing=on_missing)
    result = await agent.run("charged twice")
    assert (result.route, result.status, result.fallback_reason) == ("general", "fallback", "invalid_confidence")
    assert len(model.requests) == 2


@pytest.mark.anyio
async def test_recovery_and_force_route_work_as_with_any_classifier() -> None:
    agent, model = desk(
        [ModelError("busy", severity="retriable"), classify("billing")], recovery=Recovery(sleep=RecordedSleeps())
    )
    events = await capture_events(agent, "x")
    assert events[-1].result.route == "billing"  # type: ignore[union-attr]
    assert [e.operation for e in events if isinstance(e, RecoveryRetry)] == ["classify"]
    forced, model = desk([])
    assert (await forced.run("x", force_route="general")).route == "general" and model.requests == []
