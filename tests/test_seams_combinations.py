"""Seams found by combining features the way a user does (an adversarial hunt).

Each test is one combination that went wrong before its fix: a custom classifier's
answer flowing into dispatch, ...
"""

from __future__ import annotations

import pytest

from jeeves_router import Agent, Router, RouterRoute
from jeeves_router.classify.types import Classification, ClassifyRequest, ClassifyResult
from jeeves_router.events import RouterClassified
from jeeves_router.testing import ScriptedModel, capture_events

# -- a custom classifier's route that is not a string goes to the fallback ----------------


class ListRoute:
    """A custom classifier that answers a route as a list (e.g. the JSON of a multi-label model)."""

    async def classify(self, request: ClassifyRequest) -> ClassifyResult:
        return ClassifyResult(Classification(["billing"], 0.9, "ok", "custom"), stage="custom")  # type: ignore[arg-type]


def list_route_desk() -> Agent:
    billing = Agent("Billing.", name="billing", model=ScriptedModel(["billing answered"]))
    general = Agent("General.", name="general", model=ScriptedModel(["general answered"]))
    routes = [RouterRoute("billing", billing, "payments"), RouterRoute("general", general, "anything else")]
    return Agent("Desk.", name="desk", architecture=Router(routes, fallback_route="general", classifier=ListRoute()))


@pytest.mark.anyio
async def test_a_custom_classifiers_unhashable_route_goes_to_the_fallback_not_a_type_error() -> None:
    result = await list_route_desk().run("I was charged twice")
    assert (result.status, result.route, result.fallback_reason) == ("fallback", "general", "unknown_route")
    assert result.output == "general answered"


@pytest.mark.anyio
async def test_an_unhashable_route_is_reported_as_unknown_in_the_classified_event() -> None:
    events = await capture_events(list_route_desk(), "I was charged twice")
    classified = [e for e in events if isinstance(e, RouterClassified)]
    assert [(e.route, e.status) for e in classified] == [(None, "unknown_route")]
