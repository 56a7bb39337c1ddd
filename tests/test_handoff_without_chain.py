"""A tool's ``Handoff`` in a run no handoff chain watches is an error result the model can correct.

A tool may return ``Handoff(target=...)``; a handoff chain (an agent with ``handoffs=``, a
Router) reads it and runs the target. An agent run on its own or as a capability, with no
chain around it, ended its turn at such a tool call: the run was ``ok`` with no answer
(``output`` None on its own, ``''`` as a capability's step) — success-shaped, though nobody
took the handoff. The tool loop now answers that call as a chain answers an unknown target,
with an error result, and the model goes on.
"""

from __future__ import annotations

import json

import pytest

from jeeves_router import Agent, Capabilities, Capability, Handoff, tool
from jeeves_router.models.base import ModelRequest
from jeeves_router.testing import Call, FunctionModel, ScriptedModel, capture_events


@tool
def escalate(why: str) -> Handoff:
    """Send the case to the technical team."""
    return Handoff(target="technical", reason=why)


def worker() -> Agent:
    model = ScriptedModel([Call("escalate", {"why": "HTTP 500"}), "I looked into it myself: retry with ?format=pdf."])
    return Agent("You help.", name="worker", model=model, tools=[escalate])


@pytest.mark.anyio
async def test_an_agent_on_its_own_gets_an_error_result_for_a_tools_handoff_and_answers() -> None:
    agent = worker()
    events = await capture_events(agent, "the API returns 500")
    [result] = [ev for ev in events if ev.kind == "tool.result"]
    assert result.is_error  # type: ignore[union-attr]
    assert result.content == (  # type: ignore[union-attr]
        "unknown handoff target 'technical': agent 'worker' has no agent to hand off to; answer the request yourself"
    )
    final = events[-1].result  # type: ignore[union-attr]
    assert (final.status, final.output) == ("ok", "I looked into it myself: retry with ?format=pdf.")
    assert "handoff" not in final.metadata
    agent.model.assert_complete()  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_a_capabilitys_agent_gets_the_same_error_result() -> None:
    def planner(request: ModelRequest) -> str:
        if (request.system or "").startswith("You decide whether"):
            return "yes"
        return json.dumps({"steps": [{"capability": "work", "task": "fix the 500"}]})

    analyst = Agent(
        "Analyst.",
        name="analyst",
        model=FunctionModel(planner),
        architecture=Capabilities([Capability("work", worker(), "w")]),
    )
    result = await analyst.run("the API returns 500")
    assert (result.status, result.output) == ("ok", "I looked into it myself: retry with ?format=pdf.")
