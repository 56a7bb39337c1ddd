"""Handoff chains: Agent(handoffs=...), guards against loops, history modes, events."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from jeeves_router import Agent, Handoff, Message, Router, RouterRoute, UsageError, child_session_id, tool
from jeeves_router.architectures.handoffs.chain import HandoffChain
from jeeves_router.architectures.handoffs.tools import HandoffInput, announces_handoff
from jeeves_router.errors import ScriptExhausted
from jeeves_router.events import (
    Event,
    HandoffCompleted,
    HandoffRejected,
    HandoffRequested,
    RunCompleted,
    RunStarted,
    TextDelta,
    ToolCalled,
    ToolResult,
)
from jeeves_router.messages import assistant, user
from jeeves_router.results import RunResult
from jeeves_router.testing import Call, Chunks, Reply, ScriptedModel, capture_events


def kinds(events: list[Event], cls: type[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, cls)]


def result_of(events: list[Event]) -> RunResult:
    return kinds(events, RunCompleted)[-1].result  # type: ignore[no-any-return]


def to(name: str, reason: str = "") -> Call:
    return Call(f"transfer_to_{name}", {"reason": reason} if reason else {})


def agent(name: str, steps: Sequence[Any], handoffs: Sequence[Agent | str] = (), **kw: Any) -> Agent:
    return Agent(f"You are {name}.", name=name, model=ScriptedModel(steps, name=name), handoffs=handoffs, **kw)


def model(a: Agent) -> ScriptedModel:
    m = a.model
    assert isinstance(m, ScriptedModel)
    return m


# -- the basic chain ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_agent_with_handoffs_gets_transfer_tools_and_runs_the_chain_directly() -> None:
    billing = agent("billing", [Chunks("Refund ", "issued.")])
    triage = agent("triage", [to("billing", "double charge")], handoffs=[billing])
    assert isinstance(triage.architecture, HandoffChain)
    assert not isinstance(billing.architecture, HandoffChain)
    events = await capture_events(triage, "I was charged twice", session_id="s")
    result = result_of(events)
    assert (result.output, result.status, result.route) == ("Refund issued.", "ok", "billing")
    assert result.specialist_session_id == child_session_id("s", "billing")
    assert result.metadata["handoffs"] == ({"from": "triage", "to": "billing", "reason": "double charge"},)
    tools = [t.name for t in model(triage).requests[0].tools]
    assert tools == ["transfer_to_billing"]
    assert model(billing).requests[0].tools == ()  # billing has no handoffs
    # events: requested then completed, with from, to and reason; billing's events in the parent
    req, done = kinds(events, HandoffRequested)[0], kinds(events, HandoffCompleted)[0]
    assert (req.from_agent, req.to_agent, req.reason) == ("triage", "billing", "double charge")
    assert (done.from_agent, done.to_agent, done.reason) == ("triage", "billing", "double charge")
    assert [s.path for s in kinds(events, RunStarted)] == [("triage",), ("triage", "billing")]
    assert {d.session_id for d in kinds(events, TextDelta)} == {"s__route_billing"}
    # the agents themselves are unchanged
    assert triage.tools == () and "transfer_to_billing" not in triage.tool_map


@pytest.mark.anyio
async def test_a_handoff_ends_the_turn_at_once() -> None:
    calls: list[str] = []

    @tool
    def lookup(q: str) -> str:
        """Look something up."""
        calls.append(q)
        return "found"

    billing = agent("billing", ["Done."])
    triage = agent(
        "triage", [[to("billing"), Call("lookup", {"q": "x"})], "never used"], handoffs=[billing], tools=[lookup]
    )
    events = await capture_events(triage, "x")
    assert result_of(events).route == "billing"
    assert calls == [] and len(model(triage).requests) == 1 and model(triage).remaining == 1
    ignored = [r for r in kinds(events, ToolResult) if r.tool == "lookup"]
    assert ignored[0].is_error and "ignored" in ignored[0].content
    assert kinds(events, HandoffRejected) == []  # an ordinary tool is not a handoff


@pytest.mark.anyio
async def test_several_handoffs_in_one_turn_first_wins_others_reported() -> None:
    billing, technical = agent("billing", ["B"]), agent("technical", [])
    triage = agent("triage", [[to("billing", "pay"), to("technical", "bug")]], handoffs=[billing, technical])
    events = await capture_events(triage, "x")
    assert result_of(events).output == "B"
    rejected = kinds(events, HandoffRejected)
    assert [(r.why, r.from_agent, r.to_agent) for r in rejected] == [("duplicate", "triage", "technical")]
    assert "billing" in (rejected[0].reason or "")
    ignored = [r for r in kinds(events, ToolResult) if r.tool == "transfer_to_technical"]
    assert ignored[0].is_error and "ignored" in ignored[0].content
    # both calls are announced (each result pairs with its call); only the first was executed
    assert [c.tool for c in kinds(events, ToolCalled)] == ["transfer_to_billing", "transfer_to_technical"]
    assert model(technical).requests == []


# -- unknown targets ------------------------------------------------------------------------------------


@tool
def escalate(team: str) -> Handoff:
    """Send the case to a team."""
    return Handoff(target=team, reason="escalated", payload={"ticket": 7})


@pytest.mark.anyio
async def test_unknown_target_from_a_tool_is_an_error_the_model_corrects() -> None:
    billing = agent("billing", ["B"])
    triage = agent(
        "triage",
        [Call("escalate", {"team": "refunds"}), Call("escalate", {"team": "BILLING"})],
        handoffs=[billing],
        tools=[escalate],
    )
    events = await capture_events(triage, "x")
    result = result_of(events)
    assert (result.route, result.status) == ("billing", "ok")
    first = kinds(events, ToolResult)[0]
    assert first.is_error and "unknown handoff target 'refunds'" in first.content and "billing" in first.content
    assert [(r.why, r.to_agent) for r in kinds(events, HandoffRejected)] == [("unknown", "refunds")]
    # the payload reaches the target in its handoff note
    assert '"ticket": 7' in model(billing).requests[0].messages[-1].text


@pytest.mark.anyio
async def test_unknown_target_twice_goes_to_the_fallback() -> None:
    general, billing = agent("general", ["G"]), agent("billing", [])
    triage = Agent(
        "t",
        name="triage",
        model=ScriptedModel([Call("escalate", {"team": "x"}), Call("escalate", {"team": "y"})]),
        tools=[escalate],
        handoffs=[billing, general],
        architecture=HandoffChain(fallback="general"),
    )
    events = await capture_events(triage, "x")
    result = result_of(events)
    assert (result.status, result.route, result.fallback_reason) == ("fallback", "general", "unknown_route")
    assert [r.why for r in kinds(events, HandoffRejected)] == ["unknown", "unknown"]
    assert [(e.from_agent, e.to_agent) for e in kinds(events, HandoffCompleted)] == [("triage", "general")]


@pytest.mark.anyio
async def test_unknown_transfer_tool_twice_stops_the_turn_and_without_fallback_is_unresolved() -> None:
    billing = agent("billing", [])
    triage = agent("triage", [to("refunds"), to("refund"), "never"], handoffs=[billing])
    events = await capture_events(triage, "x")
    result = result_of(events)
    assert (result.status, result.output, result.fallback_reason) == ("unresolved", None, "unknown_route")
    assert len(model(triage).requests) == 2  # no third model call
    assert [r.to_agent for r in kinds(events, HandoffRejected)] == ["refunds", "refund"]


@pytest.mark.anyio
@pytest.mark.parametrize("fallback", [None, "general"])
async def test_a_routed_specialist_without_handoffs_whose_tool_names_an_unknown_target_is_not_silent(
    fallback: str | None,
) -> None:
    # The specialist has no handoff tools, so its model cannot correct the target: the chain says
    # so with a handoff.rejected event, then goes to the fallback or ends unresolved.
    billing = agent("billing", [Call("escalate", {"team": "supervisor"}), "never"], tools=[escalate])
    general = agent("general", ["G"])
    desk = Agent(
        "desk",
        name="desk",
        model=ScriptedModel(["route: billing\nconfidence: 0.9"]),
        architecture=Router(
            [RouterRoute("billing", billing, "billing"), RouterRoute("general", general, "general")],
            fallback_route=fallback,
        ),
    )
    events = await capture_events(desk, "I was charged twice")
    result = result_of(events)
    rejected = kinds(events, HandoffRejected)
    assert [(r.from_agent, r.to_agent, r.why) for r in rejected] == [("billing", "supervisor", "unknown")]
    assert len(model(billing).requests) == 1  # its turn ended with the handoff: no second model call
    if fallback is None:
        assert (result.status, result.output, result.fallback_reason) == ("unresolved", None, "unknown_route")
        assert "no fallback" in rejected[0].reason
        assert events.index(rejected[0]) == len(events) - 2  # just before the router's run.completed
    else:
        assert (result.status, result.route, result.output) == ("fallback", "general", "G")
        assert "fallback 'general'" in rejected[0].reason
        assert events.index(rejected[0]) < events.index(kinds(events, HandoffRequested)[0])


# -- limits and cycles ----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_max_handoffs_ends_the_run_with_a_clear_status() -> None:
    a = agent("a", [to("b")] * 5, handoffs=["b"])
    b = agent("b", [to("a")] * 5, handoffs=[a])
    a.handoffs = (b,)
    a.architecture = HandoffChain(max_handoffs=3, max_edge_traversals=10)
    events = await capture_events(a, "x")
    result = result_of(events)
    assert (result.status, result.output) == ("handoff_limit", None)
    assert len(result.metadata["handoffs"]) == 3
    rejected = kinds(events, HandoffRejected)
    assert [(r.why, r.from_agent, r.to_agent) for r in rejected] == [("limit", "b", "a")]
    assert "max_handoffs=3" in (rejected[0].reason or "")


@pytest.mark.anyio
async def test_cycle_beyond_a_b_a_is_detected() -> None:
    a = agent("a", [to("b")] * 3, handoffs=["b"])
    c = agent("c", [to("a")] * 3, handoffs=[a])
    b = agent("b", [to("c")] * 3, handoffs=[c])
    a.handoffs = (b,)
    events = await capture_events(a, "x")
    result = result_of(events)
    assert (result.status, result.output) == ("handoff_cycle", None)
    hops = [(h["from"], h["to"]) for h in result.metadata["handoffs"]]
    assert hops == [("a", "b"), ("b", "c"), ("c", "a")] * 2
    rejected = kinds(events, HandoffRejected)
    assert [(r.why, r.from_agent, r.to_agent) for r in rejected] == [("cycle", "a", "b")]
    assert "a -> b already taken 2 time(s)" in (rejected[0].reason or "")  # counted per edge
    assert not any(isinstance(e, TextDelta) for e in events)


@pytest.mark.anyio
async def test_a_cycle_can_be_declared_by_name() -> None:
    c = agent("c", [to("a", "back")], handoffs=["a"])
    b = agent("b", [to("c")], handoffs=[c])
    a = agent("a", [to("b"), "A answers"], handoffs=[b])
    result = await a.run("x", session_id="s")
    assert (result.output, result.route) == ("A answers", "a")
    assert result.specialist_session_id is None  # the entry agent answered, under the run's own session
    assert [(h["from"], h["to"]) for h in result.metadata["handoffs"]] == [("a", "b"), ("b", "c"), ("c", "a")]


def test_chain_errors_name_the_problem() -> None:
    import anyio

    ghost = agent("a", [], handoffs=["nobody"])
    with pytest.raises(UsageError, match="'nobody', which is not an agent"):
        anyio.run(ghost.run, "x")
    twin1, twin2 = agent("twin", []), agent("twin", [])
    both = agent("a", [], handoffs=[twin1, twin2])
    with pytest.raises(UsageError, match="both called 'twin'"):
        anyio.run(both.run, "x")
    with pytest.raises(UsageError, match="max_edge_traversals"):
        HandoffChain(max_edge_traversals=0)
    with pytest.raises(UsageError, match="fallback"):
        anyio.run(agent("a", [], handoffs=[twin1], architecture=HandoffChain(fallback="zzz")).run, "x")

    @tool(name="transfer_to_twin")
    def clash() -> str:
        """Clash."""
        return ""

    with pytest.raises(UsageError, match="named like a generated handoff tool"):
        anyio.run(agent("a", [], handoffs=[twin1], tools=[clash]).run, "x")


# -- announced handoffs without a tool call ---------------------------------------------------------------


@pytest.mark.anyio
async def test_announced_handoff_without_tool_gets_one_corrective_reprompt() -> None:
    billing = agent("billing", ["B"])
    triage = agent("triage", ["I'll transfer you to billing now.", to("billing")], handoffs=[billing])
    events = await capture_events(triage, "x")
    assert result_of(events).route == "billing"
    assert [r.why for r in kinds(events, HandoffRejected)] == ["no_handoff"]
    second = model(triage).requests[1]
    assert "transfer_to_billing" in second.messages[-1].text
    assert second.messages[-2].text == "I'll transfer you to billing now."


@pytest.mark.anyio
async def test_announced_handoff_twice_goes_to_the_fallback() -> None:
    general, billing = agent("general", ["G"]), agent("billing", [])
    triage = Agent(
        "t",
        name="triage",
        handoffs=[billing, general],
        architecture=HandoffChain(fallback="general"),
        model=ScriptedModel(["Transferring you to billing.", "Let me hand you over to the billing team."]),
    )
    result = await triage.run("x")
    assert (result.status, result.route, result.fallback_reason, result.output) == (
        "fallback",
        "general",
        "no_handoff",
        "G",
    )


@pytest.mark.anyio
async def test_the_reprompted_agent_may_answer_itself() -> None:
    billing = agent("billing", [])
    triage = agent("triage", ["Routing you to billing.", "Actually: your refund is on its way."], handoffs=[billing])
    result = await triage.run("x")
    assert (result.status, result.route, result.output) == ("ok", "triage", "Actually: your refund is on its way.")


def test_announcement_detection() -> None:
    targets = ["billing", "tech-support"]
    assert announces_handoff("I'll transfer you to billing.", targets)
    assert announces_handoff("Let me hand this over to the tech support folks", targets)
    assert announces_handoff("Connecting you with a specialist.", targets)
    assert announces_handoff("calling transfer_to_billing", targets)
    assert announces_handoff("I'm routing your request to the billing team.", targets)
    assert not announces_handoff("I will transfer $50 to your account.", targets)
    assert not announces_handoff("Our billing team will transfer the refund within 3 days.", targets)
    assert not announces_handoff("Please hand over your receipt to billing.", targets)
    assert not announces_handoff("The transferred amount was refunded.", targets)
    assert not announces_handoff("Billing runs on the 1st.", targets)
    assert not announces_handoff("", targets)


@pytest.mark.anyio
async def test_detection_can_be_turned_off() -> None:
    billing = agent("billing", [])
    triage = Agent(
        "t",
        name="triage",
        handoffs=[billing],
        architecture=HandoffChain(detect_announced=None),
        model=ScriptedModel(["I'll transfer you to billing."]),
    )
    assert (await triage.run("x")).output == "I'll transfer you to billing."


# -- what the target sees -------------------------------------------------------------------------------


def chain_with(history: Any) -> tuple[Agent, Agent]:
    billing = agent("billing", ["B"])
    triage = Agent(
        "t",
        name="triage",
        handoffs=[billing],
        architecture=HandoffChain(history=history),
        model=ScriptedModel([Reply(text="One moment.", calls=[to("billing", "pay")])]),
    )
    return triage, billing


@pytest.mark.anyio
async def test_history_all_shows_everything() -> None:
    triage, billing = chain_with("all")
    await triage.run("charged twice", history=[user("hi"), assistant("hello")])
    msgs = model(billing).requests[0].messages
    assert [m.role for m in msgs] == ["user", "assistant", "user", "assistant", "user"]
    assert msgs[2].text == "charged twice" and msgs[3].text.startswith("One moment.")
    # the earlier agent's tool call is shown as a text note (the target lacks that tool)
    assert not msgs[3].tool_calls and "[called transfer_to_billing(" in msgs[3].text
    assert "triage handed this conversation to you (billing); reason: pay" in msgs[-1].text


@pytest.mark.anyio
async def test_history_last_shows_the_request_only() -> None:
    triage, billing = chain_with("last")
    await triage.run("charged twice", history=[user("hi"), assistant("hello")])
    assert [m.text for m in model(billing).requests[0].messages] == ["charged twice"]


@pytest.mark.anyio
async def test_history_callable_chooses() -> None:
    seen: list[HandoffInput] = []

    def pick(inp: HandoffInput) -> list[Message]:
        seen.append(inp)
        return [assistant(f"(from {inp.from_agent})"), user(inp.request.upper())]

    triage, billing = chain_with(pick)
    result = await triage.run("charged twice", history=[user("hi")])
    assert [m.text for m in model(billing).requests[0].messages] == ["(from triage)", "CHARGED TWICE"]
    assert seen[0].to_agent == "billing" and seen[0].reason == "pay" and seen[0].history == (user("hi"),)
    assert [m.role for m in seen[0].transcript] == ["assistant", "tool"]
    # the run's messages: the request, then every agent's turn
    assert [m.role for m in result.messages] == ["user", "assistant", "tool", "assistant"]


# -- sticky chains and streaming ----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_sticky_chain_resumes_with_the_last_agent() -> None:
    billing = agent("billing", ["B1", "B2"])
    triage = Agent(
        "t",
        name="triage",
        handoffs=[billing],
        architecture=HandoffChain(sticky=True),
        model=ScriptedModel([to("billing")]),
    )
    await triage.run("x", session_id="s")
    again = await triage.run("y", session_id="s")
    assert (again.output, again.metadata["sticky"]) == ("B2", True)
    assert len(model(triage).requests) == 1


@pytest.mark.anyio
async def test_specialist_failure_is_reported_in_the_parent_and_raised() -> None:
    billing = agent("billing", [])  # its script is empty: the model call fails
    triage = agent("triage", [to("billing")], handoffs=[billing])
    stream = triage.stream("x")
    events: list[Any] = []
    with pytest.raises(ScriptExhausted):
        async for ev in stream:
            events.append(ev)
    failed = [e for e in events if e.kind == "run.failed"]
    assert [f.path for f in failed] == [("triage", "billing"), ("triage",)]
    assert stream.error is not None and stream.result is None


@pytest.mark.anyio
async def test_stream_closes_cleanly_on_break_mid_chain() -> None:
    billing = agent("billing", [Chunks("one ", "two")])
    triage = agent("triage", [to("billing")], handoffs=[billing])
    seen: list[str] = []
    async with triage.stream("x") as events:
        async for ev in events:
            seen.append(ev.kind)
            if isinstance(ev, HandoffCompleted):
                break
    assert seen[-1] == "handoff.completed" and model(billing).requests == []


@pytest.mark.anyio
async def test_a_journaled_chain_replays_without_calling_a_model() -> None:
    from jeeves_router.journal import JournalRuntime, MemoryJournal

    journal = MemoryJournal()

    def build(live: bool) -> Agent:
        def m(name: str, steps: list[Any]) -> ScriptedModel:
            return ScriptedModel(steps if live else [], name=name)

        b = Agent("b", name="b", model=m("b", [to("a", "back")]), handoffs=["a"])
        return Agent(
            "a", name="a", model=m("a", [to("b", "go"), "A again"]), handoffs=[b], runtime=JournalRuntime(journal)
        )

    first = await build(True).run("x", session_id="s")
    replayed = await build(False).resume("s")  # any model call would raise ScriptExhausted
    assert (first.output, replayed.output) == ("A again", "A again")
    assert replayed.metadata["handoffs"] == first.metadata["handoffs"]


@pytest.mark.anyio
async def test_default_limit_is_eight_handoffs() -> None:
    last = agent("a9", ["never"])
    chain = [last]
    for i in range(8, -1, -1):
        chain.insert(0, agent(f"a{i}", [to(chain[0].name)], handoffs=[chain[0]]))
    events = await capture_events(chain[0], "x")
    result = result_of(events)
    assert (result.status, len(result.metadata["handoffs"])) == ("handoff_limit", 8)
    assert [(r.why, r.from_agent, r.to_agent) for r in kinds(events, HandoffRejected)] == [("limit", "a8", "a9")]
    assert model(last).requests == []


@pytest.mark.anyio
async def test_an_ignored_call_after_the_handoff_is_not_an_unknown_target() -> None:
    billing = agent("billing", ["B"])
    triage = agent("triage", [[to("billing"), to("ghost")]], handoffs=[billing])
    events = await capture_events(triage, "x")
    assert result_of(events).route == "billing"
    assert kinds(events, HandoffRejected) == []
    ignored = [r for r in kinds(events, ToolResult) if r.tool == "transfer_to_ghost"]
    assert "ignored" in ignored[0].content
