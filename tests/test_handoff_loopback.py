"""A handoff desk over the real provider clients, talking to the loopback server."""

from __future__ import annotations

import json

import pytest

from jeeves_router import Agent, RouterRoute
from jeeves_router.architectures.router import HandoffRouter
from jeeves_router.events import HandoffCompleted, RouterDispatched, RunCompleted, TextDelta
from jeeves_router.models.anthropic import AnthropicModel
from jeeves_router.models.openai import OpenAIModel
from jeeves_router.testing import capture_events
from tests.loopback import LoopbackServer, Reply, ToolCall, loopback  # noqa: F401  (fixture)


@pytest.mark.anyio
async def test_classify_tool_then_transfer_across_providers(loopback: LoopbackServer) -> None:  # noqa: F811
    loopback.script(
        Reply(
            tool_calls=[ToolCall("c1", "classify_as_billing", ['{"reason": "charged', ' twice", "confidence": 0.9}'])]
        ),
        Reply(text="Checking. ", tool_calls=[ToolCall("t1", "transfer_to_technical", '{"reason": "API error"}')]),
        Reply(text=["Restart ", "the job."]),
    )
    technical = Agent(
        "You debug APIs.", name="technical", model=OpenAIModel("gpt-4.1-mini", client=loopback.openai_client())
    )
    billing = Agent(
        "You resolve payments.",
        name="billing",
        handoffs=[technical],
        model=AnthropicModel("claude-haiku-4-5", client=loopback.anthropic_client()),
    )
    desk = Agent(
        "Support desk.",
        name="desk",
        model=OpenAIModel("gpt-4.1-nano", client=loopback.openai_client()),
        architecture=HandoffRouter(
            [RouterRoute("billing", billing, "payments"), RouterRoute("technical", technical, "API errors")]
        ),
    )
    events = await capture_events(desk, "I was charged twice and the API returns 500", session_id="lb")
    result = [e for e in events if isinstance(e, RunCompleted)][-1].result
    assert (result.status, result.route, result.output) == ("ok", "technical", "Restart the job.")
    assert result.confidence == 0.9
    # the dispatch is the router's (router.dispatched); the specialist's transfer is a handoff
    assert [e.route for e in events if isinstance(e, RouterDispatched)] == ["billing"]
    assert [(e.from_agent, e.to_agent) for e in events if isinstance(e, HandoffCompleted)] == [("billing", "technical")]
    assert [d.text for d in events if isinstance(d, TextDelta) and d.path == ("desk", "technical")] == [
        "Restart ",
        "the job.",
    ]
    router_req, billing_req, tech_req = loopback.requests
    assert [t["function"]["name"] for t in router_req.body["tools"]] == ["classify_as_billing", "classify_as_technical"]
    assert billing_req.provider == "anthropic"
    assert {t["name"] for t in billing_req.body["tools"]} == {"transfer_to_technical", "transfer_to_desk"}
    assert billing_req.last_user_text == "I was charged twice and the API returns 500"
    # billing's transfer travels in the history technical sees (history="all"), as a note
    assert "billing handed this conversation to you (technical)" in tech_req.last_user_text
    assert "transfer_to_technical" in json.dumps(tech_req.body["messages"])
    assert result.usage.requests == 3
