"""The Router end to end through Agent.run, on scripted models."""

from __future__ import annotations

from typing import Any

import pytest

from jeeves_router import (
    Agent,
    Router,
    RouterClassified,
    RouterDispatched,
    RouterFallback,
    RouterRoute,
    RouterUnresolved,
    Usage,
    UsageError,
)
from jeeves_router.testing import Chunks, ScriptedModel, StaticClassifier, capture_events

pytestmark = pytest.mark.anyio


def specialist(name: str, *replies: Any) -> Agent:
    return Agent(f"You are {name}.", name=name, model=ScriptedModel(list(replies) or [f"{name} answer"], name=name))


def desk(
    classifier_replies: list[Any], *, fallback: str | None = "general", threshold: float = 0.6, **router_kw: Any
) -> tuple[Agent, ScriptedModel, dict[str, Agent]]:
    agents = {n: specialist(n) for n in ("billing", "technical", "general")}
    model = ScriptedModel(classifier_replies, name="classifier")
    router = Router(
        routes=[
            RouterRoute("billing", agents["billing"], "payments, invoices, refunds"),
            RouterRoute("technical", agents["technical"], "errors, bugs, API problems"),
            RouterRoute("general", agents["general"], "anything else"),
        ],
        fallback_route=fallback,
        require_confidence_above=threshold,
        **router_kw,
    )
    return Agent("Support desk", name="desk", model=model, architecture=router), model, agents


async def test_direct_dispatch() -> None:
    agent, model, agents = desk(["route: billing\nconfidence: 0.9"])
    r = await agent.run("I was charged twice", session_id="s-42")
    assert (r.output, r.status, r.route, r.confidence, r.used_fallback) == (
        "billing answer",
        "ok",
        "billing",
        0.9,
        False,
    )
    assert r.specialist_session_id == "s-42__route_billing"
    model.assert_complete()
    for a in agents.values():
        m = a.model
        assert isinstance(m, ScriptedModel)
        assert len(m.requests) == (1 if a.name == "billing" else 0)


async def test_usage_sums_classifier_and_specialist() -> None:
    agent, _, _ = desk(["route: billing\nconfidence: 0.9"])
    r = await agent.run("refund please")
    assert r.usage == Usage(20, 10, 0, 2, 0.0)
    assert r.usage_by_route["<classifier>"].requests == 1
    assert r.usage_by_route["billing"].requests == 1


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("route: billing\nconfidence: 0.2", "low_confidence"),
        ("route: refunds\nconfidence: 0.9", "unknown_route"),
        ("I am not sure", "missing_route"),
        ("route: billing\nconfidence: very", "invalid_confidence"),
        ("route: billing", "missing_confidence"),
    ],
)
async def test_each_fallback_reason(reply: str, reason: str) -> None:
    # max_format_retries=0 so the malformed reply is final
    agent, _, _ = desk([reply], max_format_retries=0)
    events = await capture_events(agent, "hello", session_id="s")
    r = events[-1].result  # type: ignore[union-attr]
    assert r.status == "fallback" and r.route == "general" and r.used_fallback
    assert r.fallback_reason == reason
    fb = [e for e in events if isinstance(e, RouterFallback)]
    assert len(fb) == 1 and fb[0].reason == reason and fb[0].fallback_route == "general"
    assert r.output == "general answer"


@pytest.mark.parametrize("reply", ["route: billing\nconfidence: 0.1", "route: nowhere\nconfidence: 1", "nothing"])
async def test_unresolved_without_fallback(reply: str) -> None:
    agent, _, agents = desk([reply], fallback=None, max_format_retries=0)
    events = await capture_events(agent, "hello")
    r = events[-1].result  # type: ignore[union-attr]
    assert r.status == "unresolved" and r.output is None and r.route is None and not r.ok
    assert any(isinstance(e, RouterUnresolved) for e in events)
    assert not any(isinstance(e, RouterDispatched) for e in events)
    assert all(len(a.model.requests) == 0 for a in agents.values())  # type: ignore[union-attr]


async def test_malformed_reply_retried_once_with_format_error() -> None:
    agent, model, _ = desk(["I think billing", "route: billing\nconfidence: 0.8"])
    r = await agent.run("refund")
    assert (r.route, r.status) == ("billing", "ok")
    assert len(model.requests) == 2
    second = model.requests[1]
    assert second.messages[-2].text == "I think billing"
    assert "Format error" in second.messages[-1].text and "route:" in second.messages[-1].text
    assert r.usage_by_route["<classifier>"].requests == 2


async def test_malformed_twice_falls_back() -> None:
    agent, model, _ = desk(["??", "still ??"])
    r = await agent.run("x")
    assert r.status == "fallback" and r.fallback_reason == "missing_route" and len(model.requests) == 2


async def test_classifier_call_shape() -> None:
    agent, model, _ = desk(["route: general\nconfidence: 0.99"])
    await agent.run("What are your hours?")
    req = model.requests[0]
    assert req.temperature == 0.0 and req.max_tokens is not None and req.max_tokens <= 64
    assert req.purpose == "classify"
    assert req.system is not None
    for name, desc in [("billing", "payments, invoices, refunds"), ("technical", "errors, bugs")]:
        assert name in req.system and desc in req.system
    assert "route:" in req.system and "confidence:" in req.system
    assert req.messages[-1].text == "What are your hours?"


async def test_examples_and_literal_braces_in_prompt() -> None:
    billing = specialist("billing")
    model = ScriptedModel(["route: billing\nconfidence: 1"])
    prompt = 'Routes:\n{routes}\nReply as JSON like {"route": "<name>", "confidence": 0.5} using {route_names}.'
    agent = Agent(
        "d",
        name="desk",
        model=model,
        architecture=Router(
            [RouterRoute("billing", billing, "money", examples=["Where is my invoice?"])], classifier_prompt=prompt
        ),
    )
    await agent.run("x")
    system = model.requests[0].system or ""
    assert '{"route": "<name>", "confidence": 0.5}' in system
    assert "Where is my invoice?" in system and "using billing." in system


async def test_force_route_skips_classification() -> None:
    agent, model, _ = desk([])
    events = await capture_events(agent, "x", force_route="technical")
    assert not any(isinstance(e, RouterClassified) for e in events)
    d = [e for e in events if isinstance(e, RouterDispatched)]
    assert d[0].forced and d[0].route == "technical"
    assert events[-1].result.output == "technical answer"  # type: ignore[union-attr]
    assert model.requests == []
    with pytest.raises(UsageError, match="force_route 'nope'"):
        await agent.run("x", force_route="nope")


@pytest.mark.parametrize("given", ["Technical", "TECHNICAL", " technical ", "technical"])
async def test_force_route_matches_route_names_as_the_classifiers_do(given: str) -> None:
    # was: "Technical" refused ("is not a declared route") while the parser, the classify tools
    # and handoff targets all match route names case- and separator-insensitively
    agent, model, _ = desk([])
    events = await capture_events(agent, "x", session_id="s", force_route=given)
    d = [e for e in events if isinstance(e, RouterDispatched)]
    assert [(e.route, e.forced, e.child_session_id) for e in d] == [("technical", True, "s__route_technical")]
    result = events[-1].result  # type: ignore[union-attr]
    assert (result.route, result.output, result.usage_by_route.keys() >= {"technical"}) == (
        "technical",
        "technical answer",
        True,
    )
    assert model.requests == []


async def test_force_route_outside_the_declared_routes_is_still_refused_with_the_routes() -> None:
    agent, _, _ = desk([])
    for name in ("Technica", "tech support", "desk"):
        with pytest.raises(UsageError) as info:
            await agent.run("x", force_route=name)
        assert str(info.value) == (
            f"force_route {name!r} is not a declared route; pass one of the declared routes of 'desk': "
            "billing, technical, general"
        )


async def test_classified_event_fields() -> None:
    agent, _, _ = desk(["route: billing\nconfidence: 0.75\nreason: invoice"])
    events = await capture_events(agent, "x", session_id="p")
    c = next(e for e in events if isinstance(e, RouterClassified))
    assert (c.route, c.confidence, c.threshold, c.status, c.reason, c.stage) == (
        "billing",
        0.75,
        0.6,
        "ok",
        "invoice",
        "llm",
    )
    assert c.raw.startswith("route: billing") and c.session_id == "p" and c.path == ("desk",)


async def test_static_classifier_outside_declared_set_never_dispatched() -> None:
    agents = {n: specialist(n) for n in ("a", "b")}
    router = Router([RouterRoute(n, a) for n, a in agents.items()], classifier=StaticClassifier("zzz"))
    r = await Agent("d", name="desk", architecture=router).run("x")
    assert r.status == "unresolved" and r.fallback_reason == "unknown_route"


async def test_specialist_tokens_stream_through_parent() -> None:
    billing = Agent("b", name="billing", model=ScriptedModel([Chunks("Re", "fund", "ed.")]))
    agent = Agent(
        "d",
        name="desk",
        model=ScriptedModel(["route: billing\nconfidence: 1"]),
        architecture=Router([RouterRoute("billing", billing)]),
    )
    events = await capture_events(agent, "x", session_id="s")
    deltas = [e for e in events if e.kind == "text.delta"]
    assert [d.text for d in deltas] == ["Re", "fund", "ed."]  # type: ignore[union-attr]
    assert all(d.path == ("desk", "billing") and d.session_id == "s__route_billing" for d in deltas)
    kinds = [e.kind for e in events]
    assert kinds.index("router.dispatched") < kinds.index("text.delta") < kinds.index("router.completed")


async def test_nested_routers() -> None:
    leaf = specialist("refunds")
    inner = Agent(
        "inner",
        name="billing",
        model=ScriptedModel(["route: refunds\nconfidence: 1"]),
        architecture=Router([RouterRoute("refunds", leaf)]),
    )
    outer = Agent(
        "outer",
        name="desk",
        model=ScriptedModel(["route: billing\nconfidence: 1"]),
        architecture=Router([RouterRoute("billing", inner)]),
    )
    events = await capture_events(outer, "x", session_id="s")
    r = events[-1].result  # type: ignore[union-attr]
    assert r.output == "refunds answer" and r.usage.requests == 3
    assert any(
        e.path == ("desk", "billing", "refunds") and e.session_id == "s__route_billing__route_refunds" for e in events
    )


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"routes": []}, "at least one route"),
        ({"routes": "dup"}, "duplicate route name"),
        ({"routes": "badname"}, "not allowed"),
        ({"fallback_route": "nope"}, "fallback_route 'nope'"),
        ({"require_confidence_above": 1.5}, "within \\[0, 1\\]"),
        ({"require_confidence_above": -0.1}, "within \\[0, 1\\]"),
        ({"classifier_prompt": "Pick one of {routes} for {user_name}"}, "unknown placeholder"),
        ({"classifier_prompt": "no placeholders"}, "must contain"),
    ],
)
def test_construction_errors(kwargs: dict[str, Any], match: str) -> None:
    a, b = specialist("billing"), specialist("general")
    routes: Any = [RouterRoute("billing", a), RouterRoute("general", b)]
    if kwargs.get("routes") == "dup":
        kwargs["routes"] = [RouterRoute("Tech-Support", a), RouterRoute("tech_support", b)]
    elif kwargs.get("routes") == "badname":
        kwargs["routes"] = [RouterRoute("bill ing!", a)]
    kwargs.setdefault("routes", routes)
    with pytest.raises(UsageError, match=match):
        Router(**kwargs)


def test_router_agent_needs_a_model() -> None:
    with pytest.raises(UsageError, match="no model for its classifier"):
        Agent("d", name="desk", architecture=Router([RouterRoute("a", specialist("a"))]))
