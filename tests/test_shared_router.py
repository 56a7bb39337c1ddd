"""One Router (or HandoffRouter) instance held by two router agents classifies with each agent's model.

A Router without ``classifier=`` / ``classifier_model=`` builds its classifier from the router
agent's model (a HandoffRouter: a tool-call classifier instructed by the agent). It kept the
first one it built: a second agent holding the same instance had its requests classified by
the first agent's model, with the first agent's instructions. The handoff graph was already
worked out per agent; the classifier now is too.
"""

from __future__ import annotations

from typing import Any

import pytest

from jeeves_router import Agent, HandoffRouter, Router, RouterRoute
from jeeves_router.testing import Call, ScriptedModel

pytestmark = pytest.mark.anyio


def classify_reply(kind: str, route: str) -> Any:
    if kind == "router":
        return f"route: {route}\nconfidence: 0.9"
    return Call(f"classify_as_{route}", {"reason": "fits", "confidence": 0.9})


@pytest.mark.parametrize("kind", ["router", "handoff_router"])
async def test_two_agents_sharing_one_router_classify_with_their_own_models(kind: str) -> None:
    billing = Agent("You bill.", name="billing", model=ScriptedModel(["billed", "billed"]))
    technical = Agent("You debug.", name="technical", model=ScriptedModel(["fixed", "fixed"]))
    routes = [RouterRoute("billing", billing, "payments"), RouterRoute("technical", technical, "errors")]
    shared = Router(routes) if kind == "router" else HandoffRouter(routes, sticky=False, hand_back=False)
    eu_model = ScriptedModel([classify_reply(kind, "billing")], name="eu")
    us_model = ScriptedModel([classify_reply(kind, "technical")], name="us")
    eu = Agent("European desk.", name="eu-desk", model=eu_model, architecture=shared)
    us = Agent("American desk.", name="us-desk", model=us_model, architecture=shared)

    first = await eu.run("I was charged twice")
    second = await us.run("The API returns 500")

    assert (first.route, first.output) == ("billing", "billed")
    assert (second.route, second.output) == ("technical", "fixed")  # was: the eu model's (used up) script
    assert (len(eu_model.requests), len(us_model.requests)) == (1, 1)
    if kind == "handoff_router":  # the tool-call classifier is instructed by its own agent
        assert "American desk." in (us_model.requests[0].system or "")
        assert "European desk." not in (us_model.requests[0].system or "")
    assert shared.classifier_for(eu) is shared.classifier_for(eu)  # built once per agent
    assert shared.classifier_for(eu) is not shared.classifier_for(us)


async def test_a_classifier_given_to_the_router_is_shared_by_its_agents() -> None:
    billing = Agent("You bill.", name="billing", model=ScriptedModel(["billed", "billed"]))
    clf = ScriptedModel(["route: billing\nconfidence: 0.9"] * 2, name="clf")
    shared = Router([RouterRoute("billing", billing, "payments")], classifier_model=clf)
    one = Agent("One.", name="one", model=ScriptedModel([]), architecture=shared)
    two = Agent("Two.", name="two", model=ScriptedModel([]), architecture=shared)
    assert [(await a.run("x")).route for a in (one, two)] == ["billing", "billing"]
    assert len(clf.requests) == 2 and shared.classifier_for(one) is shared.classifier_for(two)
