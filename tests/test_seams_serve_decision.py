"""Seams of the served router: the routing decision read from a run's events.

A streamed chat completion sends its ``X-Jeeves-*`` headers with the decision known at its
first token, and a session's turn that has no result (cut off, failed) shows how far its
routing got; both are read from the run's routing events. A run that reclassified after a
failed dispatch (recovery) made a second decision: they must describe the decision that
answered, as the run's result does.
"""

from __future__ import annotations

import json

import httpx2 as httpx
import pytest

from jeeves_router import Agent, ErrorClassification, ErrorSeverity, Recovery, Router, RouterRoute
from jeeves_router.events import HandoffCompleted, routing_update
from jeeves_router.journal import JournalRuntime, MemoryJournal, session_turns
from jeeves_router.models.base import ModelRequest
from jeeves_router.serve import create_app
from jeeves_router.testing import Call, FunctionModel, RecordedSleeps
from tests.serve_apps import desk_with, running


class NotMine(Exception):
    """A specialist saying the request is not for it."""


def not_mine(exc: BaseException, context: object) -> ErrorClassification | None:
    if isinstance(exc, NotMine):
        return ErrorClassification(ErrorSeverity.RECLASSIFICATION, "That is not a general question.")
    return None


def refuses(request: ModelRequest) -> str:
    raise NotMine("not mine")


def desk(first: str, second: str, fallback: str) -> Agent:
    """``general`` answers nothing (RECLASSIFICATION); the classifier answers ``first``, then ``second``."""

    def classify(request: ModelRequest) -> str:
        again = "not a general question" in (request.system or "") + request.messages[-1].text
        return second if again else first

    billing = Agent("Billing.", name="billing", model=FunctionModel(lambda r: "billing answer", name="billing"))
    general = Agent("General.", name="general", model=FunctionModel(refuses, name="general"))
    return Agent(
        "Desk",
        name="desk",
        model=FunctionModel(classify, name="classifier"),
        architecture=Router(
            routes=[
                RouterRoute("billing", billing, "payments"),
                RouterRoute("general", general, "the rest", classify_error=not_mine),
            ],
            fallback_route=fallback,
            require_confidence_above=0.6,
            recovery=Recovery(sleep=RecordedSleeps()),
        ),
    )


def decision_headers(response: httpx.Response) -> dict[str, str]:
    return {k: v for k, v in response.headers.items() if k.startswith("x-jeeves-") and k != "x-jeeves-session-id"}


@pytest.mark.parametrize(
    ("first", "second", "fallback", "expected"),
    [
        # the fallback answered nothing; the second classification dispatched billing directly
        (
            "route: billing\nconfidence: 0.3",
            "route: billing\nconfidence: 0.9",
            "general",
            {"x-jeeves-route": "billing", "x-jeeves-confidence": "0.9000"},
        ),
        # a first confident decision, then a second one the classifier got wrong (no confidence known)
        (
            "route: general\nconfidence: 0.9",
            "route: nowhere\nconfidence: 0.8",
            "billing",
            {"x-jeeves-route": "billing", "x-jeeves-fallback-reason": "unknown_route"},
        ),
    ],
    ids=["fallback-then-direct", "direct-then-unknown"],
)
def test_a_streamed_reply_sends_the_decision_that_answered_after_a_reclassification(
    first: str, second: str, fallback: str, expected: dict[str, str]
) -> None:
    body = {"model": "desk", "messages": [{"role": "user", "content": "I was charged twice"}]}
    with running(create_app(desk(first, second, fallback))) as server:
        whole = httpx.post(server.url + "/v1/chat/completions", json=body)
        streamed = httpx.post(server.url + "/v1/chat/completions", json={**body, "stream": True})
    assert whole.status_code == streamed.status_code == 200
    assert decision_headers(streamed) == decision_headers(whole)
    jeeves = whole.json()["jeeves"]
    assert (jeeves["route"], jeeves["status"]) == ("billing", "ok" if "x-jeeves-confidence" in expected else "fallback")
    assert decision_headers(whole) == expected


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("first", "second", "fallback", "decision"),
    [
        ("route: billing\nconfidence: 0.3", "route: billing\nconfidence: 0.9", "general", ("billing", 0.9, None)),
        (
            "route: general\nconfidence: 0.9",
            "route: nowhere\nconfidence: 0.8",
            "billing",
            ("billing", None, "unknown_route"),
        ),
    ],
    ids=["fallback-then-direct", "direct-then-unknown"],
)
async def test_a_session_turn_cut_off_after_a_reclassification_shows_the_decision_that_was_answering(
    first: str, second: str, fallback: str, decision: tuple[str, float | None, str | None]
) -> None:
    agent = desk(first, second, fallback)
    agent.runtime = runtime = JournalRuntime(MemoryJournal())
    async with agent.stream("I was charged twice", session_id="s") as events:
        async for ev in events:
            if ev.kind == "text.delta":  # billing answers: the client goes away
                break
    [turn] = await session_turns(runtime.journal, "s")
    assert (turn.status, turn.route, turn.confidence, turn.fallback_reason) == ("cut", *decision)


def handing_off_desk() -> Agent:
    """billing hands every request off to ``refunds``, an agent that is not a declared route."""
    refunds = Agent("Refunds.", name="refunds", model=FunctionModel(lambda r: "Refund done.", name="refunds"))
    return desk_with(FunctionModel(lambda r: Call("transfer_to_refunds", {"reason": "a refund"})), handoffs=[refunds])


def test_after_a_handoff_the_streamed_headers_name_the_agent_the_result_names() -> None:
    body = {"model": "desk", "messages": [{"role": "user", "content": "refund me"}], "stream": True}
    with running(create_app(handing_off_desk())) as server:
        streamed = httpx.post(server.url + "/v1/chat/completions", json=body)
    final = [json.loads(line[6:]) for line in streamed.text.splitlines() if line.startswith("data: {")][-1]
    assert final["jeeves"]["route"] == "refunds"  # the result names the agent that answered
    assert streamed.headers["x-jeeves-route"] == "refunds"  # and so do the headers (was: billing)


@pytest.mark.anyio
async def test_a_turn_cut_off_after_a_handoff_shows_the_agent_that_had_the_turn() -> None:
    agent = handing_off_desk()
    agent.runtime = runtime = JournalRuntime(MemoryJournal())
    async with agent.stream("refund me", session_id="s") as events:
        async for ev in events:
            if ev.kind == "text.delta":
                break
    [turn] = await session_turns(runtime.journal, "s")
    assert (turn.status, turn.route) == ("cut", "refunds")


def test_a_handoff_back_to_the_router_itself_leaves_no_route() -> None:
    back = HandoffCompleted(session_id="s", path=("desk",), from_agent="refunds", to_agent="desk")
    assert routing_update(back) == {"route": None}
    on = HandoffCompleted(session_id="s", path=("desk",), from_agent="billing", to_agent="refunds")
    assert routing_update(on) == {"route": "refunds"}
