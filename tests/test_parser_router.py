"""Issue 15 through a real Router: the snippets, and validation at the decision boundary.

Every classifier's result reaches :func:`resolve_route` (``Router.decide`` and
``HandoffRouter.decide``), which rejects a confidence that is NaN, infinite, outside [0, 1]
or not a number with the reason ``invalid_confidence``, whoever produced it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jeeves_router import (
    Agent,
    Classification,
    ClassifyRequest,
    ClassifyResult,
    Router,
    RouterClassified,
    RouterDispatched,
    RouterFallback,
    RouterRoute,
    RouterUnresolved,
    resolve_route,
)
from jeeves_router.architectures.router import HandoffRouter
from jeeves_router.classify.embedding import EmbeddingClassifier, HashingEncoder
from jeeves_router.classify.types import RouteSpec
from jeeves_router.testing import Call, ScriptedModel, capture_events

pytestmark = pytest.mark.anyio

NAMES = ("billing", "technical", "general", "admin")


def desk(
    replies: list[Any] | None = None, *, fallback: str | None = "general", classifier: Any = None
) -> tuple[Agent, dict[str, Agent]]:
    agents = {n: Agent(f"You are {n}.", name=n, model=ScriptedModel([f"{n} answer"], name=n)) for n in NAMES}
    router = Router(
        routes=[RouterRoute(n, agents[n], f"{n} requests") for n in NAMES],
        fallback_route=fallback,
        require_confidence_above=0.5,
        max_format_retries=0,
        classifier=classifier,
    )
    model = ScriptedModel(replies or [], name="classifier")
    return Agent("Support desk", name="desk", model=model, architecture=router), agents


def answered(agents: dict[str, Agent]) -> list[str]:
    return [n for n, a in agents.items() if a.model.requests]  # type: ignore[union-attr]


# -- the snippets, end to end ------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "reason", "seen"),
    [
        ("route: billing\nconfidence: 1/5", "invalid_confidence", "fraction"),
        ("route: billing\nconfidence: 1 out of 10", "invalid_confidence", "out of"),
        ("route: billing\nroute: admin\nconfidence: 0.9", "ambiguous_route", "several routes"),
        ("route: admin\nconfidence: 0.9\nroute: billing", "ambiguous_route", "several routes"),
        ("route: billing\nroute: refunds\nconfidence: 0.9", "ambiguous_route", "several routes"),
        ('{"route": "billing", "route": "admin", "confidence": 0.9}', "ambiguous_route", "several routes"),
    ],
)
async def test_unusable_replies_fall_back_with_their_reason(reply: str, reason: str, seen: str) -> None:
    agent, agents = desk([reply])
    events = await capture_events(agent, "hello", session_id="s")
    result = events[-1].result  # type: ignore[union-attr]
    assert (result.status, result.route, result.used_fallback, result.fallback_reason) == (
        "fallback",
        "general",
        True,
        reason,
    )
    classified = next(e for e in events if isinstance(e, RouterClassified))
    assert classified.route is None or classified.status != "ok"
    assert classified.reason is not None and seen in classified.reason
    fallback = [e for e in events if isinstance(e, RouterFallback)]
    assert len(fallback) == 1 and fallback[0].reason == reason
    assert answered(agents) == ["general"]


@pytest.mark.parametrize("reply", ["route: billing\nroute: admin\nconfidence: 0.9", "route: admin\nroute: billing"])
async def test_ambiguous_without_fallback_is_unresolved(reply: str) -> None:
    agent, agents = desk([reply], fallback=None)
    events = await capture_events(agent, "hello")
    result = events[-1].result  # type: ignore[union-attr]
    assert (result.status, result.route, result.output, result.fallback_reason) == (
        "unresolved",
        None,
        None,
        "ambiguous_route",
    )
    unresolved = next(e for e in events if isinstance(e, RouterUnresolved))
    assert unresolved.reason == "ambiguous_route"
    assert not any(isinstance(e, RouterDispatched) for e in events) and answered(agents) == []


@pytest.mark.parametrize(
    ("reply", "route"),
    [
        ('{"route": "technical", "confidence": 0.9}\nNote: not {billing}.', "technical"),
        ('route: billing\nconfidence: 0.9\nreason: user pasted {"route": "x"}', "billing"),
    ],
)
async def test_json_snippets_dispatch_the_right_route(reply: str, route: str) -> None:
    agent, agents = desk([reply])
    result = await agent.run("hello")
    assert (result.status, result.route, result.confidence, result.used_fallback) == ("ok", route, 0.9, False)
    assert answered(agents) == [route]


async def test_a_format_retry_fixes_an_ambiguous_reply() -> None:
    agents = {n: Agent(f"You are {n}.", name=n, model=ScriptedModel([f"{n} answer"], name=n)) for n in NAMES}
    model = ScriptedModel(["route: billing\nroute: admin\nconfidence: 0.9", "route: admin\nconfidence: 0.9"])
    router = Router([RouterRoute(n, agents[n]) for n in NAMES], fallback_route="general", max_format_retries=1)
    result = await Agent("d", name="desk", model=model, architecture=router).run("x")
    assert (result.route, result.status) == ("admin", "ok")
    assert "more than one route" in model.requests[1].messages[-1].text


# -- every classifier, one boundary --------------------------------------------------------


class FixedClassifier:
    """A custom classifier that reports whatever it was built with."""

    def __init__(self, route: Any, confidence: Any, stage: str = "custom") -> None:
        self.result = ClassifyResult(Classification(route, confidence, "ok", "custom"), stage=stage)

    async def classify(self, request: ClassifyRequest) -> ClassifyResult:
        return self.result


BAD = [math.nan, math.inf, -math.inf, -0.1, 1.5, 1e308, "0.9", None, True, [0.9]]


@pytest.mark.parametrize("confidence", BAD, ids=repr)
async def test_custom_classifier_bad_confidence_falls_back(confidence: Any) -> None:
    agent, agents = desk(classifier=FixedClassifier("billing", confidence))
    result = await agent.run("x")
    assert (result.route, result.used_fallback, result.fallback_reason) == ("general", True, "invalid_confidence")
    assert answered(agents) == ["general"]


@pytest.mark.parametrize("confidence", [math.nan, 1.5, -1.0])
async def test_custom_classifier_bad_confidence_without_fallback_is_unresolved(confidence: float) -> None:
    agent, agents = desk(classifier=FixedClassifier("billing", confidence), fallback=None)
    result = await agent.run("x")
    assert (result.status, result.fallback_reason) == ("unresolved", "invalid_confidence")
    assert answered(agents) == []


async def test_custom_classifier_good_edges_dispatch() -> None:
    for confidence in (0.5, 1.0, np.float32(0.75)):
        agent, agents = desk(classifier=FixedClassifier("billing", confidence))
        result = await agent.run("x")
        assert (result.route, result.used_fallback) == ("billing", False)
        assert answered(agents) == ["billing"]


class PoisonEncoder(HashingEncoder):
    """Embeds requests containing "poison" as NaN vectors (a broken model)."""

    def encode_tokens(self, texts: Sequence[str]) -> Any:
        vectors, tokens = super().encode_tokens(texts)
        if any("poison" in t for t in texts):
            return np.full_like(vectors, np.nan), [np.full_like(t, np.nan) for t in tokens]
        return vectors, tokens

    def encode(self, texts: Sequence[str]) -> Any:
        return self.encode_tokens(texts)[0]


async def test_embedded_classifier_nan_confidence_falls_back() -> None:
    specs = tuple(RouteSpec(n, f"{n} requests", (f"a {n} question",)) for n in NAMES)
    embedded = EmbeddingClassifier(specs, encoder=PoisonEncoder())
    agent, agents = desk(classifier=embedded)
    events = await capture_events(agent, "poison: a billing question")
    assert answered(agents) == ["general"]
    classified = next(e for e in events if isinstance(e, RouterClassified))
    # the Router's contract check reports a bad confidence alike for every classifier
    assert classified.stage == "embedding" and classified.status == "invalid_confidence"
    assert (classified.route, classified.confidence) == (None, 0.0) and classified.requested is not None
    result = events[-1].result  # type: ignore[union-attr]
    assert (result.route, result.fallback_reason) == ("general", "invalid_confidence")


@pytest.mark.anyio
@pytest.mark.parametrize("confidence", [math.nan, math.inf, 1.5, -0.5, 0.9])
async def test_tool_call_handoff_bad_confidence_falls_back(confidence: float) -> None:
    agents = {n: Agent(f"You are {n}.", name=n, model=ScriptedModel([f"{n} here."])) for n in NAMES}
    call = Call("classify_as_billing", {"reason": "fits", "confidence": confidence})
    desk = Agent(
        "Desk",
        name="desk",
        model=ScriptedModel([call]),
        architecture=HandoffRouter(
            [RouterRoute(n, agents[n]) for n in NAMES], fallback_route="general", require_confidence_above=0.5
        ),
    )
    result = await desk.run("x")
    if confidence == 0.9:
        assert (result.route, result.used_fallback) == ("billing", False)
    else:
        assert (result.route, result.used_fallback, result.fallback_reason) == ("general", True, "invalid_confidence")


@settings(max_examples=300)
@given(
    st.one_of(st.none(), st.sampled_from(NAMES), st.text(max_size=8), st.integers()),
    st.one_of(st.floats(), st.integers(), st.none(), st.booleans(), st.text(max_size=4)),
    st.sampled_from(["ok", "ambiguous_route", "unknown_route", "weird"]),
    st.floats(min_value=0.0, max_value=1.0),
    st.sampled_from([None, "general"]),
)
def test_resolve_route_never_dispatches_an_invalid_classification(
    route: Any, confidence: Any, status: Any, threshold: float, fallback: str | None
) -> None:
    decision = resolve_route(
        Classification(route, confidence, status, "x"), threshold=threshold, fallback=fallback, routes=NAMES
    )
    assert decision.route is None or decision.route in NAMES
    if decision.route is not None and not decision.used_fallback:
        assert status == "ok" and route in NAMES
        assert isinstance(confidence, (int, float)) and not isinstance(confidence, bool)
        assert math.isfinite(confidence) and threshold <= confidence <= 1.0
    if status == "ambiguous_route":
        assert decision.reason == "ambiguous_route"
    elif status == "ok" and isinstance(route, str) and route in NAMES:
        valid = isinstance(confidence, (int, float)) and not isinstance(confidence, bool) and 0 <= confidence <= 1
        assert (decision.reason == "invalid_confidence") == (not valid)
