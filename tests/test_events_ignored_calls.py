"""Every ``tool.result`` event follows the ``tool.called`` of its call, an ignored call's too.

A model that hands off and makes more calls in the same turn gets each later call answered
"ignored: this turn already handed off to ..." (never executed). Those results were sent
without their ``tool.called``: a consumer pairing events by ``call_id`` (a UI showing each
call, the trace page) met a result for a call it never saw, and the call's arguments were in
no event.
"""

from __future__ import annotations

import pytest

from jeeves_router import Agent, HandoffRouter, RouterRoute, tool
from jeeves_router.events import ToolCalled, ToolResult
from jeeves_router.testing import Call, ScriptedModel, capture_events


@tool
def lookup(invoice: str) -> str:
    """Look an invoice up."""
    raise AssertionError("a call after the handoff is never executed")


@pytest.mark.anyio
async def test_calls_after_a_handoff_are_announced_before_their_ignored_results() -> None:
    technical = Agent("You debug.", name="technical", model=ScriptedModel(["It is a known bug."]))
    turn = [
        Call("transfer_to_technical", {"reason": "API error"}, id="c1"),
        Call("lookup", {"invoice": "INV-7"}, id="c2"),
        Call("transfer_to_desk", {"reason": "back"}, id="c3"),
    ]
    billing = Agent("You bill.", name="billing", model=ScriptedModel([turn]), tools=[lookup], handoffs=[technical])
    router_model = ScriptedModel([Call("classify_as_billing", {"reason": "invoice", "confidence": 0.9})])
    routes = [RouterRoute("billing", billing, "payments"), RouterRoute("technical", technical, "errors")]
    desk = Agent("Desk.", name="desk", model=router_model, architecture=HandoffRouter(routes))

    events = await capture_events(desk, "INV-7 download returns 500")

    tool_events = [(ev.kind, ev.call_id) for ev in events if isinstance(ev, (ToolCalled, ToolResult))]
    assert tool_events == [
        ("tool.called", "c1"),
        ("tool.result", "c1"),
        ("tool.called", "c2"),
        ("tool.result", "c2"),
        ("tool.called", "c3"),
        ("tool.result", "c3"),
    ]
    called = {ev.call_id: ev.arguments for ev in events if isinstance(ev, ToolCalled)}
    assert called["c2"] == {"invoice": "INV-7"}
    ignored = [ev for ev in events if isinstance(ev, ToolResult) and ev.call_id in ("c2", "c3")]
    assert all(ev.is_error and ev.content.startswith("ignored: this turn already handed off") for ev in ignored)
    assert [ev.why for ev in events if ev.kind == "handoff.rejected"] == ["duplicate"]
    assert events[-1].result.route == "technical"  # type: ignore[union-attr]
