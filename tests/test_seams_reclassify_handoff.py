"""Seams: a RECLASSIFICATION raised by an agent a Router's route handed off to (not itself a route).

The README: "a failing specialist reached by a sticky session or a handoff is retried or, on
RECLASSIFICATION, the request is classified again without its route". An agent reached only
through a handoff has no route of its own; its turn was dispatched to the route that handed
off to it, so that route is the one left out. It used to stop ``critical`` with the reason
``reclassify_unavailable`` and the advice to "run this agent behind a Router" — it was behind
a recovering Router.
"""

from __future__ import annotations

import pytest

from jeeves_router import Agent, ErrorClassification, ErrorSeverity, Recovery, Router, RouterRoute
from jeeves_router.events import Event, RecoveryReclassify
from jeeves_router.models.base import ModelRequest
from jeeves_router.testing import Call, FunctionModel, RecordedSleeps, Reply, capture_events


class NotMine(Exception):
    """The agent says the request is not for it."""


def not_mine(exc: BaseException, context: object) -> ErrorClassification | None:
    return (
        ErrorClassification(ErrorSeverity.RECLASSIFICATION, "Not an API problem.") if isinstance(exc, NotMine) else None
    )


def desk(technical_fails: list[bool]) -> Agent:
    """billing hands "API" requests off to technical (not a route), which refuses while ``technical_fails[0]``."""

    def technical_answer(request: ModelRequest) -> str:
        if technical_fails[0]:
            raise NotMine("not technical")
        return "technical answer"

    technical = Agent(
        "API problems.",
        name="technical",
        model=FunctionModel(technical_answer, name="technical"),
        classify_error=not_mine,
    )

    def billing_answer(request: ModelRequest) -> Reply | str:
        if "api" in request.messages[-1].text.lower():
            return Reply(calls=[Call("transfer_to_technical", {"reason": "an API problem"})])
        return "billing answer"

    billing = Agent(
        "Payments.", name="billing", model=FunctionModel(billing_answer, name="billing"), handoffs=[technical]
    )
    general = Agent("The rest.", name="general", model=FunctionModel(lambda r: "general answer", name="general"))

    def classify(request: ModelRequest) -> str:
        offered = request.system or ""
        route = "billing" if "billing" in offered.split("Routes:")[-1] else "general"
        return f"route: {route}\nconfidence: 0.9"

    return Agent(
        "Desk",
        name="desk",
        model=FunctionModel(classify, name="classifier"),
        architecture=Router(
            routes=[RouterRoute("billing", billing, "payments"), RouterRoute("general", general, "the rest")],
            sticky=True,
            recovery=Recovery(sleep=RecordedSleeps()),
        ),
    )


def reclassified(events: list[Event]) -> list[tuple[str, ...]]:
    return [ev.excluded for ev in events if isinstance(ev, RecoveryReclassify)]


@pytest.mark.anyio
async def test_a_handoff_target_that_is_not_a_route_is_reclassified_without_the_route_that_handed_off() -> None:
    agent = desk([True])
    events = await capture_events(agent, "the API fails on my invoice", session_id="s")
    result = events[-1].result  # type: ignore[union-attr]
    assert reclassified(events) == [("billing",)]
    assert (result.status, result.route, result.output) == ("ok", "general", "general answer")
    assert result.metadata["excluded_routes"] == ("billing",)


@pytest.mark.anyio
async def test_a_sticky_turn_of_such_an_agent_is_classified_again_and_then_sticks_to_the_route_that_answered() -> None:
    fails = [False]
    agent = desk(fails)
    first = await agent.run("the API fails on my invoice", session_id="s")
    assert (first.route, first.output) == ("technical", "technical answer")
    fails[0] = True
    events = await capture_events(agent, "still failing", session_id="s")  # sticky: straight to technical
    second = events[-1].result  # type: ignore[union-attr]
    assert reclassified(events) == [()]  # no route of its own, none dispatched this turn: nothing left out
    assert (second.status, second.route, second.output) == ("ok", "billing", "billing answer")
    third = await agent.run("thanks", session_id="s")
    assert (third.route, third.metadata["sticky"]) == ("billing", True)
