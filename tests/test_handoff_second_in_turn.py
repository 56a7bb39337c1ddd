"""A second handoff in one turn is reported the same way whichever tool asked for it.

The tool loop answers every call after a turn's handoff "ignored" (never run). A chain reported
that as ``handoff.rejected`` (``duplicate``) only for its generated ``transfer_to_<agent>``
tools: a second call of an agent's own tool declared ``-> Handoff`` was answered "ignored" with
no handoff event, and in a turn that had no transfer tools (a plain turn: a Router's
specialist without ``handoffs=``) no ignored call was reported at all. Both now go through one
function (``ChainState._ignored``), fed by the calls the tool loop itself records as ignored.
An own tool is never run after the handoff, so its target is not known (``to_agent`` is empty).
"""

from __future__ import annotations

import pytest

from jeeves_router import Agent, Handoff, Router, RouterRoute, tool
from jeeves_router.events import Event, HandoffRejected, RunCompleted, ToolResult
from jeeves_router.testing import Call, ScriptedModel, StaticClassifier, capture_events

pytestmark = pytest.mark.anyio

ran: list[str] = []


@tool
def escalate(team: str) -> Handoff:
    """Send the case to a team."""
    ran.append(team)
    return Handoff(target=team, reason="escalated")


@tool
def escalate_maybe(team: str) -> Handoff | str:
    """Send the case to a team, or say why not."""
    ran.append(team)
    return Handoff(target=team)


@tool
def lookup(q: str) -> str:
    """Look something up."""
    ran.append(q)
    return "found"


def rejected(events: list[Event]) -> list[tuple[str, str, str, str | None]]:
    return [(e.why, e.from_agent, e.to_agent, e.reason) for e in events if isinstance(e, HandoffRejected)]


def ignored(events: list[Event]) -> list[str]:
    return [e.tool for e in events if isinstance(e, ToolResult) and e.content.startswith("ignored:")]


def triage_desk(turn: list[Call]) -> tuple[Agent, Agent]:
    billing = Agent("b", name="billing", model=ScriptedModel(["B"]))
    technical = Agent("t", name="technical", model=ScriptedModel(["T"]))
    triage = Agent(
        "tr",
        name="triage",
        model=ScriptedModel([turn]),
        tools=[escalate, escalate_maybe, lookup],
        handoffs=[billing, technical],
    )
    return triage, billing


@pytest.mark.parametrize(
    ("turn", "route", "expected"),
    [
        # a transfer tool after an own tool's handoff: as before
        ([Call("escalate", {"team": "technical"}), Call("transfer_to_billing", {})], "technical", "billing"),
        # an own handoff tool after a transfer: was not reported
        ([Call("transfer_to_billing", {}), Call("escalate", {"team": "technical"})], "billing", ""),
        # the same own tool twice: was not reported
        ([Call("escalate", {"team": "technical"}), Call("escalate", {"team": "billing"})], "technical", ""),
        # a tool that may return a Handoff (a union) counts as one that hands off
        ([Call("transfer_to_billing", {}), Call("escalate_maybe", {"team": "technical"})], "billing", ""),
    ],
)
async def test_a_second_handoff_in_a_watched_turn_is_rejected_as_a_duplicate(
    turn: list[Call], route: str, expected: str
) -> None:
    ran.clear()
    triage, _ = triage_desk(turn)
    events = await capture_events(triage, "x")
    assert rejected(events) == [("duplicate", "triage", expected, f"ignored: this turn already handed off to {route}")]
    assert len(ignored(events)) == 1
    assert ran == (["technical"] if turn[0].name == "escalate" else [])  # the ignored call never ran
    assert events[-1].result.route == route  # type: ignore[union-attr]


async def test_an_ordinary_tool_ignored_after_a_handoff_is_no_handoff() -> None:
    ran.clear()
    triage, _ = triage_desk([Call("escalate", {"team": "billing"}), Call("lookup", {"q": "x"})])
    events = await capture_events(triage, "x")
    assert ignored(events) == ["lookup"] and rejected(events) == [] and ran == ["billing"]


async def test_a_plain_turn_reports_its_second_handoff_after_the_turn() -> None:
    # a Router's specialist without handoffs= runs as it is (no transfer tools, not watched)
    ran.clear()
    billing = Agent(
        "b",
        name="billing",
        model=ScriptedModel(
            [[Call("escalate", {"team": "technical"}), Call("lookup", {"q": "x"}), Call("escalate", {"team": "x"})]]
        ),
        tools=[escalate, lookup],
    )
    technical = Agent("t", name="technical", model=ScriptedModel(["Fixed."]))
    routes = [RouterRoute("billing", billing, "payments"), RouterRoute("technical", technical, "errors")]
    desk = Agent("Desk.", name="desk", architecture=Router(routes, classifier=StaticClassifier("billing")))

    events = await capture_events(desk, "x")

    assert ignored(events) == ["lookup", "escalate"] and ran == ["technical"]
    assert rejected(events) == [("duplicate", "billing", "", "ignored: this turn already handed off to technical")]
    kinds = [e.kind for e in events]
    billing_done = next(i for i, e in enumerate(events) if isinstance(e, RunCompleted) and e.path[-1] == "billing")
    assert billing_done < kinds.index("handoff.rejected") < kinds.index("handoff.requested")
    assert events[-1].result.route == "technical"  # type: ignore[union-attr]
