"""The support-desk example end to end through the Router, over the loopback server."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from support_desk import build_desk

from jeeves_router import TextDelta
from jeeves_router.models.anthropic import AnthropicModel
from jeeves_router.models.openai import OpenAIModel
from tests.loopback import LoopbackServer, RecordedRequest, Reply, Status, ToolCall, loopback  # noqa: F401


def desk_responder(request: RecordedRequest) -> Reply:
    """Answer like the desk's models would, whatever order the calls come in."""
    if "route" in request.system_text.lower() and "billing" in request.system_text:
        return Reply(text="route: billing\nconfidence: 0.93", input_tokens=300, cached_tokens=256)
    sent = json.dumps(request.body["messages"])
    if "tool_result" in sent or '"role": "tool"' in sent:
        return Reply(text=["Invoice INV-1001 ", "was paid twice; ", "refunding 42.00."])
    return Reply(tool_calls=[ToolCall("call_1", "lookup_invoice", ['{"invoice_id": ', '"INV-1001"}'])])


@pytest.mark.anyio
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_support_desk_end_to_end(loopback: LoopbackServer, provider: str) -> None:  # noqa: F811
    if provider == "openai":
        make = lambda name: OpenAIModel(name, client=loopback.openai_client())  # noqa: E731
        names = ("gpt-4.1-nano", "gpt-4.1-mini", "gpt-4.1-mini", "gpt-4.1-mini")
    else:
        make = lambda name: AnthropicModel(name, client=loopback.anthropic_client())  # noqa: E731
        names = ("claude-haiku-4-5",) * 4
    loopback.script(Status(429, headers={"retry-after": "0"}))  # the classifier's first call is rate limited
    loopback.responder = desk_responder
    desk = build_desk(*(make(n) for n in names))
    deltas: list[str] = []
    async with desk.stream("I was charged twice for invoice INV-1001", session_id="s-42") as events:
        async for ev in events:
            if isinstance(ev, TextDelta):
                deltas.append(ev.text)
    result = events.result
    assert result is not None and result.route == "billing", result
    assert "".join(deltas) == "Invoice INV-1001 was paid twice; refunding 42.00."
    assert result.output == "".join(deltas)
    assert len(loopback.requests) == 4  # 429 + classify + tool call + answer
    assert result.usage.requests >= 3 and result.usage.cost_usd is not None
    classify = loopback.requests[1].body
    if provider == "anthropic":
        assert classify["system"][0]["cache_control"] == {"type": "ephemeral"}
    else:
        assert classify["temperature"] == 0


@pytest.mark.anyio
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_classifier_reply_is_constrained_to_the_routes(loopback: LoopbackServer, provider: str) -> None:  # noqa: F811
    if provider == "openai":  # a loopback server is not api.openai.com: opt in explicitly
        make = lambda name: OpenAIModel(name, client=loopback.openai_client(), response_format=True)  # noqa: E731
    else:
        make = lambda name: AnthropicModel(name, client=loopback.anthropic_client())  # noqa: E731
    loopback.responder = desk_responder
    desk = build_desk(*(make(n) for n in ("m1", "m2", "m3", "m4")))
    await desk.run("I was charged twice for invoice INV-1001", session_id="s-1")
    body = loopback.requests[0].body
    if provider == "openai":
        schema = body["response_format"]["json_schema"]["schema"]
    else:
        assert body["tool_choice"]["type"] == "tool"
        schema = next(t for t in body["tools"] if t["name"] == body["tool_choice"]["name"])["input_schema"]
    assert schema["properties"]["route"]["enum"] == ["billing", "technical", "general"]
    conf = schema["properties"]["confidence"]
    assert conf.get("minimum") == 0 and conf.get("maximum") == 1


def test_openai_constrained_replies_default_to_the_official_api_only() -> None:
    assert OpenAIModel("gpt-4.1-mini", api_key="sk-test").supports_response_format is True
    assert OpenAIModel("m", base_url="http://127.0.0.1:8000/v1").supports_response_format is False
    assert OpenAIModel("m", base_url="http://127.0.0.1:8000/v1", response_format=True).supports_response_format is True
    assert AnthropicModel("claude-haiku-4-5", api_key="k").supports_response_format is True
