"""A per-run option or ``force_route`` an agent's architecture would ignore is refused before the run.

``force_route`` was refused by a handoff chain ("force_route is for routers") but silently
ignored by a tool loop and by Capabilities, which ran unrouted; an ``options`` key no
architecture reads (``{"reset_stcky": True}``, a typo) was ignored too, so the sticky session
the caller meant to reset stayed sticky. Each built-in architecture now names the options it
takes; the HTTP server answers such a request with a 400 (its ``UsageError``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from jeeves_router import Agent, Capabilities, Capability, HandoffRouter, Router, RouterRoute, UsageError
from jeeves_router.models.base import ModelRequest
from jeeves_router.testing import Call, FunctionModel, ScriptedModel, StaticClassifier


async def sales(call: object) -> str:
    return "120 units"


def planner(request: ModelRequest) -> str:
    if (request.system or "").startswith("You decide whether"):
        return "yes"
    return json.dumps({"steps": [{"capability": "sales", "task": "units"}]})


def solo() -> Agent:
    return Agent("You help.", name="solo", model=ScriptedModel(["hi"]))


def analyst() -> Agent:
    return Agent(
        "Analyst.",
        name="analyst",
        model=FunctionModel(planner),
        architecture=Capabilities([Capability("sales", sales, "sales")]),
    )


def desk() -> Agent:
    billing = Agent("Billing.", name="billing", model=ScriptedModel(["paid"]))
    return Agent(
        "Desk.",
        name="desk",
        architecture=Router([RouterRoute("billing", billing, "payments")], classifier=StaticClassifier("billing")),
    )


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("make", "match"),
    [
        (solo, r"force_route is for routers; agent 'solo' runs a ToolLoop, which has no routes"),
        (analyst, r"force_route is for routers; agent 'analyst' runs Capabilities.*bypass_selection"),
    ],
)
async def test_force_route_on_an_agent_without_routes_is_refused(make: Any, match: str) -> None:
    agent = make()
    with pytest.raises(UsageError, match=match):
        await agent.run("units sold?", force_route="sales")
    with pytest.raises(UsageError, match=match):
        agent.stream("units sold?", force_route="sales")  # refused when the stream is made, as an unknown route is


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("make", "option", "match"),
    [
        (solo, "reset_sticky", r"agent 'solo' \(ToolLoop\) has no run option 'reset_sticky'; it takes none"),
        (
            analyst,
            "bypass",
            r"agent 'analyst' \(Capabilities\) has no run option 'bypass'; it takes: 'bypass_selection'",
        ),
        (desk, "reset_stcky", r"agent 'desk' \(Router\) has no run option 'reset_stcky'; it takes: 'reset_sticky'"),
    ],
)
async def test_an_option_the_architecture_does_not_read_is_refused(make: Any, option: str, match: str) -> None:
    with pytest.raises(UsageError, match=match):
        await make().run("units sold?", options={option: True})


@pytest.mark.anyio
async def test_the_options_each_architecture_reads_are_taken() -> None:
    assert (await analyst().run("units sold?", options={"bypass_selection": True})).output == "120 units"
    assert (await desk().run("refund", options={"reset_sticky": True})).output == "paid"
    billing = Agent("Billing.", name="billing", model=ScriptedModel(["paid", "paid again"]))
    router_model = ScriptedModel([Call("classify_as_billing", {"reason": "r", "confidence": 0.9})] * 2)
    sticky = Agent(
        "Desk.",
        name="desk",
        model=router_model,
        architecture=HandoffRouter([RouterRoute("billing", billing, "payments")]),
    )
    await sticky.run("refund", session_id="s")
    again = await sticky.run("refund", session_id="s", options={"reset_sticky": True})
    assert again.output == "paid again" and len(router_model.requests) == 2  # classified again, not sticky


def test_the_server_answers_force_route_to_an_agent_without_routes_with_a_400() -> None:
    import httpx2 as httpx

    from jeeves_router.serve import create_app
    from tests.serve_apps import running

    with running(create_app(solo())) as server:
        refused = httpx.post(server.url + "/v1/runs", json={"model": "solo", "input": "hi", "force_route": "billing"})
    assert refused.status_code == 400
    assert refused.json()["error"]["message"] == (
        "force_route is for routers; agent 'solo' runs a ToolLoop, which has no routes"
    )
