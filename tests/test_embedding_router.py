"""The embedded classifier and the cascade behind the real Router (scripted specialists)."""

from __future__ import annotations

from typing import Any

import pytest

from jeeves_router import Agent, Router, RouterClassified, RouterRoute
from jeeves_router.classify.cascade import CascadeClassifier
from jeeves_router.classify.embedding import EmbeddingClassifier, HashingEncoder
from jeeves_router.classify.types import RouteSpec
from jeeves_router.testing import ScriptedModel, StaticClassifier, capture_events

pytestmark = pytest.mark.anyio

SPECS = (
    RouteSpec("billing", "payments, invoices, refunds", ("I was charged twice", "refund my payment", "wrong invoice")),
    RouteSpec("technical", "errors, bugs, API problems", ("the app crashes", "API error 500", "server timeout")),
    RouteSpec("general", "anything else", ("hello there", "who are you")),
)


def desk(classifier: Any) -> Agent:
    agents = {
        s.name: Agent(f"You are {s.name}.", name=s.name, model=ScriptedModel([f"{s.name} answer"])) for s in SPECS
    }
    router = Router(
        routes=[RouterRoute(s.name, agents[s.name], s.description) for s in SPECS],
        classifier=classifier,
        fallback_route="general",
        require_confidence_above=0.3,
    )
    return Agent("Support desk", name="desk", model=ScriptedModel([]), architecture=router)


def embedded(threshold: float | None = None) -> EmbeddingClassifier:
    return EmbeddingClassifier(SPECS, encoder=HashingEncoder(), threshold=threshold)


async def test_router_dispatches_on_the_embedded_decision() -> None:
    events = await capture_events(desk(embedded()), "I was charged twice on my card")
    classified = next(e for e in events if isinstance(e, RouterClassified))
    assert classified.route == "billing" and classified.stage == "embedding"
    assert classified.runner_up is not None and classified.margin is not None and classified.margin > 0
    result = await desk(embedded()).run("I was charged twice on my card")
    assert result.output == "billing answer" and result.route == "billing"


async def test_router_falls_back_when_the_embedded_classifier_rejects() -> None:
    result = await desk(embedded(threshold=1.0)).run("I was charged twice")
    assert result.route == "general" and result.used_fallback


async def test_cascade_stage_and_saved_calls_reach_the_event() -> None:
    llm = StaticClassifier("technical", confidence=0.9)
    sure = CascadeClassifier(embedded(), llm, accept_above=0.0)
    events = await capture_events(desk(sure), "I was charged twice")
    classified = next(e for e in events if isinstance(e, RouterClassified))
    assert (classified.stage, classified.route, classified.model_calls_saved) == ("cascade:embedding", "billing", 1)
    unsure = CascadeClassifier(embedded(), llm, accept_above=1.0)
    events = await capture_events(desk(unsure), "I was charged twice")
    classified = next(e for e in events if isinstance(e, RouterClassified))
    assert (classified.stage, classified.route, classified.model_calls_saved) == ("cascade:llm", "technical", 0)
