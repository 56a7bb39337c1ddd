"""HandoffRouter: the Router preset with tool-call classification, sticky sessions and hand-back.

Since the Router and HandoffRouter became one, the router's turn is a
:class:`ToolCallClassifier` call: its decision is reported by ``router.classified`` /
``router.fallback`` / ``router.dispatched`` (not by handoff events), and corrections of a
reply without a usable tool call happen inside the classifier (``attempts``).
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel

from jeeves_router import Agent, ContextUpdate, RouterRoute, ToolContext, UsageError, child_session_id, tool
from jeeves_router.architectures.handoffs.session import InMemorySessionStore
from jeeves_router.architectures.router import HandoffRouter
from jeeves_router.architectures.router.router import last_turns
from jeeves_router.events import (
    Event,
    HandoffCompleted,
    RouterClassified,
    RouterDispatched,
    RouterFallback,
    RunCompleted,
    TextDelta,
)
from jeeves_router.messages import assistant, user
from jeeves_router.models.base import ModelRequest
from jeeves_router.testing import Call, Chunks, FunctionModel, Reply, ScriptedModel, capture_events


def kinds(events: list[Event], cls: type[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, cls)]


def classify(route: str, confidence: float | None = 0.9, reason: str = "fits") -> Call:
    args: dict[str, Any] = {"reason": reason}
    if confidence is not None:
        args["confidence"] = confidence
    return Call(f"classify_as_{route}", args)


def desk_with(
    router_steps: list[Any],
    *,
    billing: list[Any] | None = None,
    general: list[Any] | None = None,
    technical: list[Any] | None = None,
    **options: Any,
) -> tuple[Agent, dict[str, ScriptedModel]]:
    models = {
        "router": ScriptedModel(router_steps, name="router"),
        "billing": ScriptedModel(billing or [], name="billing"),
        "technical": ScriptedModel(technical or [], name="technical"),
        "general": ScriptedModel(general or [], name="general"),
    }
    routes = [
        RouterRoute(
            "billing",
            Agent("You resolve payments.", name="billing", model=models["billing"]),
            "payments, invoices, refunds",
            examples=["I was charged twice"],
        ),
        RouterRoute(
            "technical",
            Agent("You debug APIs.", name="technical", model=models["technical"]),
            "errors, bugs, API problems",
        ),
        RouterRoute("general", Agent("You answer anything.", name="general", model=models["general"]), "anything else"),
    ]
    options.setdefault("fallback_route", "general")
    desk = Agent("Support desk.", name="desk", model=models["router"], architecture=HandoffRouter(routes, **options))
    return desk, models


# -- generated tools and dispatch --------------------------------------------------------------


@pytest.mark.anyio
async def test_one_classify_tool_per_route_with_reason_and_confidence() -> None:
    desk, models = desk_with([classify("billing")], billing=["Refunded."])
    await desk.run("I was charged twice")
    request = models["router"].requests[0]
    specs = {t.name: t for t in request.tools}
    assert set(specs) == {"classify_as_billing", "classify_as_technical", "classify_as_general"}
    params = specs["classify_as_billing"].parameters
    assert params["required"] == ["reason", "confidence"]
    assert set(params["properties"]) == {"reason", "confidence"}
    assert "payments, invoices, refunds" in specs["classify_as_billing"].description
    assert "Support desk." in (request.system or "")  # the router agent's instructions
    assert request.temperature == 0.0 and request.tool_choice == "required"


@pytest.mark.anyio
async def test_dispatch_reads_the_target_from_the_tool_result_not_the_text() -> None:
    desk, models = desk_with(
        [Reply(text="This is clearly billing.", calls=[classify("technical", 0.8, "500 error")])],
        technical=[Chunks("Restart ", "the job.")],
    )
    events = await capture_events(desk, "The API returns 500", session_id="s-1")
    result = kinds(events, RunCompleted)[-1].result
    assert result.output == "Restart the job."
    assert result.status == "ok"
    assert result.route == "technical"
    assert result.confidence == 0.8
    assert result.specialist_session_id == child_session_id("s-1", "technical")
    assert models["billing"].requests == []
    # usage sums the router turn and the specialist
    assert result.usage.requests == 2
    assert set(result.usage_by_route) == {"<classifier>", "technical"}
    classified = kinds(events, RouterClassified)[0]
    assert (classified.route, classified.reason, classified.confidence) == ("technical", "500 error", 0.8)
    assert classified.raw == "tool:classify_as_technical" and classified.stage == "tool_call"
    assert [d.route for d in kinds(events, RouterDispatched)] == ["technical"]
    assert kinds(events, HandoffCompleted) == []  # a dispatch is not a handoff
    # the specialist's events stream in the parent, under its child session and path;
    # the router's own text never reaches the consumer
    deltas = kinds(events, TextDelta)
    assert [d.text for d in deltas] == ["Restart ", "the job."]
    assert deltas[-1].path == ("desk", "technical")
    assert deltas[-1].session_id == "s-1__route_technical"
    runs = kinds(events, RunCompleted)
    assert [r.path for r in runs] == [("desk", "technical"), ("desk",)]


@pytest.mark.anyio
async def test_below_threshold_goes_to_the_fallback() -> None:
    desk, _ = desk_with([classify("billing", 0.3)], general=["Let me help."], require_confidence_above=0.6)
    events = await capture_events(desk, "hmm")
    result = kinds(events, RunCompleted)[-1].result
    assert (result.status, result.route, result.used_fallback) == ("fallback", "general", True)
    assert result.fallback_reason == "low_confidence"
    assert result.confidence == 0.3
    fallback = kinds(events, RouterFallback)
    assert [(f.reason, f.requested_route, f.fallback_route) for f in fallback] == [
        ("low_confidence", "billing", "general")
    ]
    assert [e.route for e in kinds(events, RouterDispatched)] == ["general"]


@pytest.mark.anyio
async def test_missing_confidence_fails_closed_above_a_threshold() -> None:
    desk, _ = desk_with([classify("billing", None)], general=["Hi."], require_confidence_above=0.5)
    events = await capture_events(desk, "x")
    result = kinds(events, RunCompleted)[-1].result
    assert (result.route, result.fallback_reason) == ("general", "missing_confidence")
    assert [f.reason for f in kinds(events, RouterFallback)] == ["missing_confidence"]
    desk, _ = desk_with(
        [classify("billing", None)], billing=["Paid."], require_confidence_above=0.5, on_missing_confidence=0.7
    )
    assert (await desk.run("x")).route == "billing"


@pytest.mark.anyio
async def test_below_threshold_without_fallback_is_unresolved() -> None:
    desk, _ = desk_with([classify("billing", 0.2)], require_confidence_above=0.6, fallback_route=None)
    result = await desk.run("x")
    assert (result.status, result.output, result.fallback_reason) == ("unresolved", None, "low_confidence")


@pytest.mark.anyio
async def test_out_of_range_confidence_goes_to_the_fallback_like_the_router() -> None:
    desk, models = desk_with([classify("billing", 1.5)], general=["Hello."])
    result = await desk.run("x")
    assert (result.route, result.status, result.fallback_reason) == ("general", "fallback", "invalid_confidence")
    assert len(models["router"].requests) == 1 and models["billing"].requests == []
    none, _ = desk_with([classify("billing", float("nan"))], fallback_route=None)
    assert (await none.run("x")).status == "unresolved"


@pytest.mark.anyio
async def test_force_route_skips_the_router_turn() -> None:
    desk, models = desk_with([], technical=["Fixed."])
    result = await desk.run("x", force_route="technical")
    assert result.route == "technical" and models["router"].requests == []
    with pytest.raises(UsageError, match="force_route"):
        await desk.run("x", force_route="nope")


@pytest.mark.anyio
async def test_force_route_names_a_route_as_a_classify_tool_does() -> None:
    # classify_as_Technical picks "technical"; force_route="Technical" was refused
    desk, models = desk_with([], technical=["Fixed."])
    events = await capture_events(desk, "x", session_id="s", force_route="Technical")
    assert [(e.route, e.forced) for e in kinds(events, RouterDispatched)] == [("technical", True)]
    result = kinds(events, RunCompleted)[-1].result
    assert (result.route, result.output, result.specialist_session_id) == ("technical", "Fixed.", "s__route_technical")
    assert models["router"].requests == []


# -- several calls, unknown targets, no tool call ---------------------------------------------------


@pytest.mark.anyio
async def test_first_of_several_classifications_wins_and_the_next_is_the_runner_up() -> None:
    desk, models = desk_with([[classify("technical"), classify("billing", 0.4)]], technical=["Fixed."])
    events = await capture_events(desk, "x")
    result = kinds(events, RunCompleted)[-1].result
    assert result.route == "technical"
    classified = kinds(events, RouterClassified)[0]
    assert (classified.runner_up, classified.runner_up_confidence) == ("billing", 0.4)
    assert models["billing"].requests == []
    assert models["router"].remaining == 0 and len(models["router"].requests) == 1


@pytest.mark.anyio
async def test_unknown_route_is_corrected_once() -> None:
    desk, models = desk_with([classify("refunds"), classify("billing")], billing=["Paid."])
    events = await capture_events(desk, "x")
    assert kinds(events, RunCompleted)[-1].result.route == "billing"
    assert kinds(events, RouterClassified)[0].attempts == 2
    correction = models["router"].requests[1].messages[-1].parts[0].content  # type: ignore[union-attr]
    assert "classify_as_refunds is not one of the tools" in correction


@pytest.mark.anyio
async def test_unknown_route_twice_goes_to_the_fallback_without_a_third_call() -> None:
    desk, models = desk_with([classify("refunds"), classify("refund")], general=["Hello."])
    events = await capture_events(desk, "x")
    result = kinds(events, RunCompleted)[-1].result
    assert (result.status, result.route, result.fallback_reason) == ("fallback", "general", "unknown_route")
    assert len(models["router"].requests) == 2
    assert [(f.reason, f.requested_route) for f in kinds(events, RouterFallback)] == [("unknown_route", "refund")]


@pytest.mark.anyio
async def test_router_text_without_tool_call_is_reprompted_once() -> None:
    desk, models = desk_with(["It's billing.", classify("billing")], billing=["Paid."])
    events = await capture_events(desk, "x")
    assert kinds(events, RunCompleted)[-1].result.route == "billing"
    assert kinds(events, RouterClassified)[0].attempts == 2
    second = models["router"].requests[1]
    assert "classify_as_billing" in second.messages[-1].text
    assert second.messages[-2].text == "It's billing."


@pytest.mark.anyio
async def test_router_text_twice_goes_to_the_fallback() -> None:
    desk, _ = desk_with(["billing", "billing!"], general=["Hi."])
    result = await desk.run("x")
    assert (result.status, result.route, result.fallback_reason) == ("fallback", "general", "missing_route")
    desk, _ = desk_with(["billing", "billing!"], fallback_route=None)
    result = await desk.run("x")
    assert (result.status, result.output, result.fallback_reason) == ("unresolved", None, "missing_route")


# -- context ---------------------------------------------------------------------------------------


def context_router(request: ModelRequest) -> Reply:
    system = request.system or ""
    route = "billing" if "plan: enterprise" in system else "general"
    return Reply(calls=[classify(route, 0.9)])


@pytest.mark.anyio
async def test_same_text_with_different_context_goes_to_different_routes() -> None:
    router = FunctionModel(context_router)
    billing = Agent("b", name="billing", model=ScriptedModel(["Account manager here."]))
    general = Agent("g", name="general", model=ScriptedModel(["FAQ answer."]))
    desk = Agent(
        "Desk",
        name="desk",
        model=router,
        architecture=HandoffRouter(
            [RouterRoute("billing", billing, "paying customers"), RouterRoute("general", general, "others")]
        ),
    )
    a = await desk.run("Can you help with my invoice?", context={"plan": "enterprise"})
    b = await desk.run("Can you help with my invoice?", context={"plan": "free"})
    assert (a.route, b.route) == ("billing", "general")


class Customer(BaseModel):
    plan: str
    seats: int = 1


@pytest.mark.anyio
async def test_typed_context_is_validated_and_shown_to_the_router() -> None:
    desk, models = desk_with([classify("billing")], billing=["ok"], context_schema=Customer)
    await desk.run("x", context={"plan": "pro", "seats": "3"})
    assert "seats: 3" in (models["router"].requests[0].system or "")  # validated: "3" became 3
    with pytest.raises(UsageError, match="Customer"):
        await desk.run("x", context={"seats": 2})


@pytest.mark.anyio
async def test_router_sees_the_last_n_turns() -> None:
    history = [user("first"), assistant("a1"), user("second"), assistant("a2")]
    desk, models = desk_with([classify("billing")], billing=["ok"], history_turns=1)
    await desk.run("third", history=history)
    assert [m.text for m in models["router"].requests[0].messages] == ["second", "a2", "third"]
    assert last_turns(history, 0) == ()
    assert last_turns(history, 5) == tuple(history)


@pytest.mark.anyio
async def test_context_updates_are_copy_on_write_and_scoped_to_the_run() -> None:
    seen: list[dict[str, Any]] = []

    @tool
    def identify(email: str) -> ContextUpdate:
        """Look the customer up."""
        return ContextUpdate({"customer": email}, content="found")

    @tool
    def whoami(ctx: ToolContext) -> str:
        """Who is the customer?"""
        seen.append(dict(ctx.context))
        return str(ctx.context.get("customer"))

    billing = Agent(
        "b",
        name="billing",
        tools=[identify, whoami],
        model=ScriptedModel([Call("identify", {"email": "a@b.c"}), Call("whoami"), "done", Call("whoami"), "done"]),
    )
    router = ScriptedModel([classify("billing"), classify("billing")])
    desk = Agent(
        "Desk",
        name="desk",
        model=router,
        architecture=HandoffRouter([RouterRoute("billing", billing, "payments")], sticky=False),
    )
    caller_context = {"channel": "web"}
    first = await desk.run("x", context=caller_context)
    await desk.run("y", context=caller_context)
    assert seen == [{"channel": "web", "customer": "a@b.c"}, {"channel": "web"}]
    assert caller_context == {"channel": "web"}
    assert first.metadata["sticky"] is False


# -- sticky sessions -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_sticky_follow_up_goes_straight_to_the_last_specialist() -> None:
    desk, models = desk_with([classify("billing")], billing=["Refunded.", "You're welcome."])
    first = await desk.run("I was charged twice", session_id="s")
    events = await capture_events(
        desk, "thanks", session_id="s", history=[user("I was charged twice"), assistant("Refunded.")]
    )
    second = kinds(events, RunCompleted)[-1].result
    assert (first.route, second.route, second.output) == ("billing", "billing", "You're welcome.")
    assert len(models["router"].requests) == 1
    sticky = kinds(events, HandoffCompleted)[0]
    assert sticky.sticky and sticky.to_agent == "billing"
    assert second.metadata["sticky"] is True
    assert [m.text for m in models["billing"].requests[1].messages] == ["I was charged twice", "Refunded.", "thanks"]
    # another session is routed afresh
    other, _ = desk_with([classify("technical")], technical=["ok"])
    assert (await other.run("x", session_id="s")).route == "technical"


@pytest.mark.anyio
async def test_sticky_ends_when_the_specialist_hands_back() -> None:
    desk, models = desk_with(
        [classify("billing"), classify("technical", reason="API error")],
        billing=["Refunded.", Call("transfer_to_desk", {"reason": "not a billing question"})],
        technical=["Restarted.", "Anything else?"],
    )
    await desk.run("charged twice", session_id="s")
    events = await capture_events(desk, "the API is down", session_id="s")
    result = kinds(events, RunCompleted)[-1].result
    assert result.route == "technical"
    assert [(e.from_agent, e.to_agent, e.sticky) for e in kinds(events, HandoffCompleted)] == [
        ("desk", "billing", True),
        ("billing", "desk", False),
    ]
    assert [e.route for e in kinds(events, RouterDispatched)] == ["billing", "technical"]
    assert "billing handed the request back (not a billing question)" in (models["router"].requests[1].system or "")
    # now technical is the sticky one
    assert (await desk.run("and now?", session_id="s")).route == "technical"


@pytest.mark.anyio
async def test_caller_resets_sticky_routing() -> None:
    store = InMemorySessionStore()
    desk, _models = desk_with(
        [classify("billing"), classify("technical"), classify("general")],
        billing=["a"],
        technical=["b"],
        general=["c"],
        session_store=store,
    )
    await desk.run("x", session_id="s")
    assert await store.get("s") == "billing"
    assert (await desk.run("y", session_id="s", options={"reset_sticky": True})).route == "technical"
    arch = desk.architecture
    assert isinstance(arch, HandoffRouter)
    await arch.reset("s")
    assert await store.get("s") is None
    assert (await desk.run("z", session_id="s")).route == "general"


@pytest.mark.anyio
async def test_sticky_can_be_turned_off() -> None:
    desk, models = desk_with([classify("billing"), classify("billing")], billing=["a", "b"], sticky=False)
    await desk.run("x", session_id="s")
    await desk.run("y", session_id="s")
    assert len(models["router"].requests) == 2


def test_in_memory_store_is_bounded() -> None:
    import anyio

    async def go() -> None:
        store = InMemorySessionStore(max_sessions=2)
        for sid in ("a", "b", "c"):
            await store.set(sid, "billing")
        assert len(store) == 2 and await store.get("a") is None and await store.get("c") == "billing"

    anyio.run(go)
    with pytest.raises(UsageError):
        InMemorySessionStore(max_sessions=0)


# -- construction and streaming ----------------------------------------------------------------------


def test_construction_errors_name_the_problem() -> None:
    b = Agent("b", name="billing", model=ScriptedModel([]))
    with pytest.raises(UsageError, match="at least one route"):
        HandoffRouter([])
    with pytest.raises(UsageError, match="duplicate route"):
        HandoffRouter([RouterRoute("billing", b), RouterRoute("Billing", b)])
    with pytest.raises(UsageError, match="fallback_route"):
        HandoffRouter([RouterRoute("billing", b)], fallback_route="general")
    with pytest.raises(UsageError, match="require_confidence_above"):
        HandoffRouter([RouterRoute("billing", b)], require_confidence_above=1.5)
    with pytest.raises(UsageError, match="max_handoffs"):
        HandoffRouter([RouterRoute("billing", b)], max_handoffs=0)
    with pytest.raises(UsageError, match="history"):
        HandoffRouter([RouterRoute("billing", b)], history="some")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="no model"):
        Agent("desk", name="desk", architecture=HandoffRouter([RouterRoute("billing", b)]))
    with pytest.raises(UsageError, match="also a route"):
        Agent("desk", name="billing", model=ScriptedModel([]), architecture=HandoffRouter([RouterRoute("billing", b)]))


@pytest.mark.anyio
async def test_stream_closes_cleanly_on_break_inside_the_specialist() -> None:
    desk, _models = desk_with([classify("billing")], billing=[Chunks("one ", "two ", "three")])
    stream = desk.stream("x")
    seen: list[Event] = []
    async with stream as events:
        async for ev in events:
            seen.append(ev)
            if isinstance(ev, TextDelta):
                break
    assert isinstance(seen[-1], TextDelta) and seen[-1].text == "one "
    assert stream.error is None


@pytest.mark.anyio
async def test_a_route_with_its_own_architecture_runs_as_it_is() -> None:
    from jeeves_router import Router
    from jeeves_router.testing import StaticClassifier

    refunds = Agent("r", name="refunds", model=ScriptedModel(["Refunded."]))
    nested = Agent(
        "Billing desk",
        name="billing",
        architecture=Router([RouterRoute("refunds", refunds)], classifier=StaticClassifier("refunds")),
    )
    desk = Agent(
        "Desk",
        name="desk",
        model=ScriptedModel([classify("billing")]),
        architecture=HandoffRouter([RouterRoute("billing", nested, "payments")]),
    )
    events = await capture_events(desk, "x", session_id="s")
    result = kinds(events, RunCompleted)[-1].result
    assert (result.route, result.output) == ("billing", "Refunded.")
    assert kinds(events, TextDelta)[0].path == ("desk", "billing", "refunds")
    assert kinds(events, TextDelta)[0].session_id == "s__route_billing__route_refunds"
