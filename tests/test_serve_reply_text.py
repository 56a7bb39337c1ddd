"""A served run says the same text to a streaming client and to a whole-reply client.

The stream used to carry the text deltas of every agent of a run (an agent that wrote a
sentence and then handed the turn on, a tool loop's text before its tool call) while the whole
reply carried only the answering agent's output; an answer that was never streamed (a function
capability's) reached only the whole reply. Now both say what :class:`ReplyText` builds from the
run's events: every piece of text, a blank line between pieces other events separate, then the
answer unless the text already ends with it. Read by the real ``openai`` client.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2 as httpx
import openai

from jeeves_router import Agent, Recovery, tool
from jeeves_router.architectures.capabilities.architecture import Capabilities, Capability, CapabilityCall
from jeeves_router.messages import ToolResultPart
from jeeves_router.models.base import ModelRequest
from jeeves_router.serve import create_app
from jeeves_router.testing import Call, FunctionModel, RecordedSleeps, Reply
from tests.serve_apps import desk_with, running

PASSING_ON = "I'll pass you to our refunds desk."
REFUNDED = "Refund done."


def ask(url: str, *, stream: bool, model: str = "desk") -> tuple[str | None, dict[str, Any]]:
    """(content, jeeves) of one chat completion, read by the openai client."""
    client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)
    messages: Any = [{"role": "user", "content": "refund my order"}]
    if not stream:
        whole = client.chat.completions.create(model=model, messages=messages)
        assert whole.model_extra is not None
        return whole.choices[0].message.content, whole.model_extra["jeeves"]
    text, jeeves = "", {}
    for piece in client.chat.completions.create(model=model, messages=messages, stream=True):
        if piece.choices:
            text += piece.choices[0].delta.content or ""
        jeeves = (piece.model_extra or {}).get("jeeves") or jeeves
    return text, jeeves


def handing_off_desk() -> Agent:
    """billing writes a sentence and hands the turn to ``refunds`` in the same reply; refunds answers."""
    refunds = Agent("Refunds.", name="refunds", model=FunctionModel(lambda r: REFUNDED, name="refunds"))
    billing = FunctionModel(lambda r: Reply(PASSING_ON, calls=[Call("transfer_to_refunds", {"reason": "a refund"})]))
    return desk_with(billing, handoffs=[refunds])


def test_a_handoff_run_says_both_agents_text_streamed_and_whole() -> None:
    with running(create_app(handing_off_desk())) as server:
        streamed, streamed_jeeves = ask(server.url, stream=True)
        whole, whole_jeeves = ask(server.url, stream=False)
    assert streamed == whole == f"{PASSING_ON}\n\n{REFUNDED}"  # whole was the last agent's alone
    assert streamed_jeeves["route"] == whole_jeeves["route"] == "refunds"


@tool
async def balance() -> str:
    """The customer's balance."""
    return "5 EUR"


def looks_up(request: ModelRequest) -> Reply | str:
    last = request.messages[-1]
    if any(isinstance(p, ToolResultPart) for p in last.parts):
        return "Your balance is 5 EUR."
    return Reply("Let me look that up.", calls=[Call("balance")])


def test_text_before_a_tool_call_is_in_both_replies_after_a_blank_line() -> None:
    teller = Agent("Answer balances.", name="teller", model=FunctionModel(looks_up), tools=[balance])
    with running(create_app(teller)) as server:
        streamed, _ = ask(server.url, stream=True, model="teller")
        whole, _ = ask(server.url, stream=False, model="teller")
    assert streamed == whole == "Let me look that up.\n\nYour balance is 5 EUR."  # streamed: no blank line


def test_an_answer_that_was_not_streamed_ends_the_stream_too() -> None:
    async def refund(call: CapabilityCall) -> str:
        return REFUNDED

    def orchestrator(request: ModelRequest) -> str:
        steps = [{"capability": "lookup", "task": "find the order"}, {"capability": "refund", "task": "refund it"}]
        return json.dumps({"steps": steps})

    lookup = Agent("Look orders up.", name="lookup", model=FunctionModel(lambda r: "Order 42 found."))
    caps = [Capability("lookup", lookup, "finds orders"), Capability("refund", refund, "refunds orders")]
    arch = Capabilities(caps, bypass=True, recovery=Recovery(sleep=RecordedSleeps()))
    desk = Agent("Orchestrate.", name="desk", model=FunctionModel(orchestrator), architecture=arch)
    with running(create_app(desk)) as server:
        streamed, jeeves = ask(server.url, stream=True)
        whole, _ = ask(server.url, stream=False)
    assert jeeves["status"] == "ok"
    assert streamed == whole == f"Order 42 found.\n\n{REFUNDED}"  # the stream lacked the answer


def test_a_keyed_whole_reply_and_its_streamed_replay_say_the_same(tmp_path: Path) -> None:
    app = create_app(handing_off_desk(), journal=tmp_path / "runs.db")
    body = {"model": "desk", "messages": [{"role": "user", "content": "refund me"}]}
    headers = {"Idempotency-Key": "k-handoff"}
    with running(app) as server:
        first = httpx.post(server.url + "/v1/chat/completions", json=body, headers=headers)
        replay = httpx.post(server.url + "/v1/chat/completions", json={**body, "stream": True}, headers=headers)
    assert replay.headers["idempotent-replayed"] == "true"
    chunks = [json.loads(line[6:]) for line in replay.text.splitlines() if line.startswith("data: {")]
    streamed = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    assert first.json()["choices"][0]["message"]["content"] == streamed == f"{PASSING_ON}\n\n{REFUNDED}"
