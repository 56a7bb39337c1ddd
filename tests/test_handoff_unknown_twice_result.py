"""The second unknown target a tool hands off to is answered as unknown, not "handing off to <it>".

A chain answers a tool's first unknown target with an error result the model may correct and
takes the second to the fallback. That second call's result said "handing off to y" (the
tool's own outcome, as if it had worked): the event stream and the transcript the fallback
agent reads (``history="all"``) claimed a handoff to an agent that does not exist.
"""

from __future__ import annotations

import pytest

from jeeves_router import Agent, Handoff, HandoffChain, tool
from jeeves_router.events import ToolResult
from jeeves_router.testing import Call, ScriptedModel, capture_events


@tool
def escalate(team: str) -> Handoff:
    """Send the case to a team."""
    return Handoff(target=team, reason="escalated")


@pytest.mark.anyio
async def test_the_second_unknown_target_is_an_error_result_and_the_fallback_reads_it_so() -> None:
    general_model = ScriptedModel(["General here."])
    general = Agent("You answer everything else.", name="general", model=general_model)
    triage = Agent(
        "You triage.",
        name="triage",
        model=ScriptedModel([Call("escalate", {"team": "x"}), Call("escalate", {"team": "y"})]),
        tools=[escalate],
        handoffs=[general],
        architecture=HandoffChain(fallback="general"),
    )
    events = await capture_events(triage, "help")
    results = [ev for ev in events if isinstance(ev, ToolResult)]
    assert [(r.is_error, r.content) for r in results] == [
        (True, "unknown handoff target 'x'; hand off to one of: general"),
        (True, "unknown handoff target 'y' again; the conversation goes to the fallback"),
    ]
    seen = " ".join(m.text for m in general_model.requests[0].messages)
    assert "handing off to y" not in seen
    assert events[-1].result.route == "general"  # type: ignore[union-attr]
