"""A HandoffRouter agent without a model is told the fix a HandoffRouter takes.

The message was the Router's — "pass model=..., classifier_model=... or classifier=..." — but
``HandoffRouter`` has neither ``classifier_model=`` nor ``classifier=``: following it gave a
``TypeError``. Its classify tools are called by the router agent's own model.
"""

from __future__ import annotations

import pytest

from jeeves_router import Agent, HandoffRouter, Router, RouterRoute, UsageError
from jeeves_router.testing import ScriptedModel


def routes() -> list[RouterRoute]:
    return [RouterRoute("billing", Agent("You bill.", name="billing", model=ScriptedModel([])), "payments")]


def test_a_handoff_router_without_a_model_says_to_give_the_agent_one() -> None:
    with pytest.raises(UsageError) as refused:
        Agent("Desk.", name="desk", architecture=HandoffRouter(routes()))
    assert str(refused.value) == (
        "router agent 'desk' has no model: pass model=... to the Agent "
        "(a HandoffRouter's classify_as_<route> tools are called by the router agent's model)"
    )


def test_a_router_without_a_model_names_its_three_ways() -> None:
    with pytest.raises(UsageError) as refused:
        Agent("Desk.", name="desk", architecture=Router(routes()))
    assert str(refused.value) == (
        "router agent 'desk' has no model for its classifier: pass model=... to the Agent, "
        "or classifier_model=... or classifier=... to the Router"
    )
