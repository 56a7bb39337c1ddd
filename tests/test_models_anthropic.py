"""AnthropicModel on the real ``anthropic`` client, talking to the loopback server."""

from __future__ import annotations

import json
import logging
import random
import sys
import traceback
from collections.abc import Callable
from typing import Any

import anthropic
import anyio
import pytest

from jeeves_router.errors import ModelError, RealModelCallBlocked, StreamInterrupted, UsageError
from jeeves_router.messages import Message, TextPart, ToolCallPart, ToolResultPart, user
from jeeves_router.models.anthropic import AnthropicModel
from jeeves_router.models.base import ModelRequest, ModelResponse, ModelTextDelta, ResponseFormat, ToolSpec
from jeeves_router.models.prices import cost_usd, price_for
from jeeves_router.models.registry import resolve_model
from jeeves_router.policies import RetryPolicy
from tests.loopback import (
    FAKE_ANTHROPIC_KEY,
    Hang,
    LoopbackServer,
    Reply,
    Reset,
    Status,
    ToolCall,
    hang_once,
    loopback,  # noqa: F401  (fixture)
)

POLICY = RetryPolicy(max_attempts=3, initial_delay_s=0.5, multiplier=2.0, max_delay_s=5.0, jitter=0.0)
HELLO = ModelRequest((user("hi"),), system="You are terse.")
LOOKUP = ToolSpec("lookup_invoice", "Find an invoice", {"type": "object", "properties": {"id": {"type": "string"}}})
ROUTER_PROMPT = "Classify the customer's message as billing, technical or general."


class SleepRecorder:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


Factory = Callable[..., tuple[AnthropicModel, SleepRecorder]]


@pytest.fixture
def make(loopback: LoopbackServer) -> Factory:  # noqa: F811
    def build(timeout: float = 10.0, **kwargs: Any) -> tuple[AnthropicModel, SleepRecorder]:
        sleep = SleepRecorder()
        kwargs.setdefault("retry", POLICY)
        kwargs.setdefault("client", loopback.anthropic_client(timeout=timeout))
        model = AnthropicModel("claude-haiku-4-5", sleep=sleep, rng=random.Random(0), **kwargs)
        return model, sleep

    return build


async def drain(model: AnthropicModel, request: ModelRequest) -> tuple[list[str], list[ModelResponse]]:
    deltas: list[str] = []
    finals: list[ModelResponse] = []
    async for item in model.stream(request):
        assert not finals, "nothing may follow the final ModelResponse"
        if isinstance(item, ModelTextDelta):
            deltas.append(item.text)
        else:
            finals.append(item)
    return deltas, finals


def sent_key(headers: dict[str, str]) -> str | None:
    return headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ") or None


@pytest.mark.anyio
async def test_request_text_usage_with_cache_and_cost(loopback: LoopbackServer, make: Factory) -> None:  # noqa: F811
    reply = Reply(text="Hello!", input_tokens=3000, output_tokens=9, cached_tokens=2048, cache_write_tokens=500)
    loopback.script(reply)
    model, _ = make()
    response = await model.request(HELLO)
    assert (response.text, response.stop_reason, response.model_name) == ("Hello!", "end", "anthropic:claude-haiku-4-5")
    usage = response.usage
    # Usage counts every prompt token; the wire's input_tokens leaves out cache reads and writes.
    assert (usage.input_tokens, usage.output_tokens, usage.cached_input_tokens) == (3000, 9, 2048)
    expected = cost_usd(
        price_for("anthropic:claude-haiku-4-5"),
        input_tokens=3000,
        output_tokens=9,
        cached_input_tokens=2048,
        cache_write_tokens=500,
    )
    assert expected is not None and usage.cost_usd == pytest.approx(expected)
    body = loopback.requests[0].body
    assert loopback.requests[0].path == "/v1/messages"
    assert body["system"] == "You are terse."  # a chat turn: plain, not marked for caching
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert body["max_tokens"] == 1024


@pytest.mark.anyio
async def test_classify_request_marks_the_system_prompt_cacheable_and_is_short(
    loopback: LoopbackServer,  # noqa: F811
    make: Factory,
) -> None:
    loopback.script(Reply(text="route: billing"), Reply(text="route: general"))
    model, _ = make()
    for text in ("I was charged twice", "hello"):
        request = ModelRequest((user(text),), system=ROUTER_PROMPT, purpose="classify", temperature=0, max_tokens=16)
        await model.request(request)
    for recorded in loopback.requests:
        body = recorded.body
        assert body["system"] == [{"type": "text", "text": ROUTER_PROMPT, "cache_control": {"type": "ephemeral"}}]
        assert body["max_tokens"] == 16
        # SDK 2.x speaks API version 2026-10-21, which rejects sampling parameters: none is sent.
        assert recorded.headers["anthropic-version"] == anthropic._constants.ANTHROPIC_API_VERSION
        assert "temperature" not in body


@pytest.mark.anyio
async def test_temperature_zero_is_sent_when_enabled(loopback: LoopbackServer, make: Factory) -> None:  # noqa: F811
    loopback.script(Reply(text="route: billing"))
    model, _ = make(send_temperature=True)
    await model.request(ModelRequest((user("x"),), system=ROUTER_PROMPT, purpose="classify", max_tokens=8))
    body = loopback.requests[0].body
    assert body["temperature"] == 0 and body["max_tokens"] == 8


@pytest.mark.anyio
async def test_429_honours_retry_after_capped_by_max_delay(loopback: LoopbackServer, make: Factory) -> None:  # noqa: F811
    loopback.script(
        Status(429, headers={"retry-after": "3"}),
        Status(429, headers={"retry-after": "600"}),
        Reply(text="ok"),
    )
    model, sleep = make()
    assert (await model.request(HELLO)).text == "ok"
    assert len(loopback.requests) == 3 and sleep.delays == [3.0, 5.0]


@pytest.mark.anyio
@pytest.mark.parametrize("status", [408, 409, 429, 500, 503, 529])
async def test_retriable_statuses_use_every_attempt(loopback: LoopbackServer, make: Factory, status: int) -> None:  # noqa: F811
    loopback.script(*[Status(status)] * 3)
    model, sleep = make()
    with pytest.raises(ModelError) as info:
        await model.request(HELLO)
    err = info.value
    assert len(loopback.requests) == 3 and sleep.delays == [0.5, 1.0]
    assert (err.severity, err.status_code, err.attempt, err.provider) == ("retriable", status, 3, "anthropic")
    assert isinstance(err.__cause__, anthropic.APIStatusError) and err.__cause__.status_code == status


@pytest.mark.anyio
@pytest.mark.parametrize("status", [400, 401, 403, 404])
async def test_client_errors_are_critical_and_not_retried(loopback: LoopbackServer, make: Factory, status: int) -> None:  # noqa: F811
    loopback.script(Status(status), Reply(text="never used"))
    model, sleep = make()
    with pytest.raises(ModelError) as info:
        await model.request(HELLO)
    assert len(loopback.requests) == 1 and sleep.delays == []
    assert (info.value.severity, info.value.status_code) == ("critical", status)


@pytest.mark.anyio
async def test_prompt_too_long_is_a_context_length_error(loopback: LoopbackServer, make: Factory) -> None:  # noqa: F811
    loopback.script(Status(400, message="prompt is too long: 210000 tokens > 200000 maximum"))
    model, _ = make()
    with pytest.raises(ModelError) as info:
        await model.request(HELLO)
    assert (info.value.severity, info.value.metadata["kind"]) == ("critical", "context_length")


@pytest.mark.anyio
async def test_reset_and_timeout_are_retried(loopback: LoopbackServer, make: Factory) -> None:  # noqa: F811
    model, sleep = make(timeout=0.5)
    loopback.script(Reset(), hang_once(model._client), Reply(text="third time"))  # the adapter's copy of the client
    assert (await model.request(HELLO)).text == "third time"
    assert len(loopback.requests) == 3 and sleep.delays == [0.5, 1.0]

    loopback.script(Hang())
    model, _ = make(timeout=0.3, retry=RetryPolicy(max_attempts=1))
    with pytest.raises(ModelError) as info:
        await model.request(HELLO)
    assert info.value.metadata["kind"] == "timeout"
    assert isinstance(info.value.__cause__, anthropic.APITimeoutError)


@pytest.mark.anyio
async def test_stream_text_then_exactly_one_final_response(loopback: LoopbackServer, make: Factory) -> None:  # noqa: F811
    loopback.script(Reply(text=["Restart ", "the ", "worker."], cached_tokens=100, input_tokens=150))
    model, _ = make()
    deltas, finals = await drain(model, HELLO)
    assert deltas == ["Restart ", "the ", "worker."]
    assert len(finals) == 1 and finals[0].text == "Restart the worker."
    assert (finals[0].usage.input_tokens, finals[0].usage.cached_input_tokens) == (150, 100)


@pytest.mark.anyio
async def test_overloaded_event_before_text_is_retried(loopback: LoopbackServer, make: Factory) -> None:  # noqa: F811
    loopback.script(Reply(text=["a", "b"], error_after=1), Reply(text=["a", "b"]))
    model, sleep = make()
    deltas, _ = await drain(model, HELLO)
    assert deltas == ["a", "b"] and len(loopback.requests) == 2 and sleep.delays == [0.5]


@pytest.mark.anyio
async def test_overloaded_event_after_text_interrupts_without_duplicates(
    loopback: LoopbackServer,  # noqa: F811
    make: Factory,
) -> None:
    # events: message_start, ping, block_start, delta "a", delta "b", then the error
    loopback.script(Reply(text=["a", "b", "c"], error_after=5), Reply(text="never sent"))
    model, _ = make()
    seen: list[str] = []
    with pytest.raises(StreamInterrupted) as info:
        async for item in model.stream(HELLO):
            if isinstance(item, ModelTextDelta):
                seen.append(item.text)
    assert seen == ["a", "b"] and len(loopback.requests) == 1
    assert info.value.status_code == 529
    assert isinstance(info.value.__cause__, anthropic.APIStatusError)


@pytest.mark.anyio
async def test_disconnect_after_text_interrupts_before_text_retries(loopback: LoopbackServer, make: Factory) -> None:  # noqa: F811
    loopback.script(Reply(text=["x", "y"], disconnect_after=2), Reply(text=["x", "y"]))
    model, sleep = make()
    deltas, _ = await drain(model, HELLO)
    assert deltas == ["x", "y"] and len(loopback.requests) == 2 and sleep.delays == [0.5]

    loopback.script(Reply(text=["x", "y", "z"], disconnect_after=4), Reply(text="never sent"))
    seen: list[str] = []
    with pytest.raises(StreamInterrupted) as info:
        async for item in model.stream(HELLO):
            if isinstance(item, ModelTextDelta):
                seen.append(item.text)
    assert seen == ["x"] and len(loopback.requests) == 3
    assert info.value.metadata["kind"] == "connection"
    assert info.value.__cause__ is not None


@pytest.mark.anyio
async def test_malformed_sse_and_truncated_stream_are_retried_before_text(
    loopback: LoopbackServer,  # noqa: F811
    make: Factory,
) -> None:
    loopback.script(Reply(text="ok", malformed_at=0), Reply(text="ok", truncate_after=2), Reply(text="ok"))
    model, sleep = make()
    deltas, finals = await drain(model, HELLO)
    assert deltas == ["ok"] and len(finals) == 1
    assert len(loopback.requests) == 3 and sleep.delays == [0.5, 1.0]


@pytest.mark.anyio
async def test_streamed_tool_use_fragments_and_malformed_json(loopback: LoopbackServer, make: Factory) -> None:  # noqa: F811
    calls = [
        ToolCall("toolu_1", "lookup_invoice", ['{"id": ', '"INV-', '42"}']),
        ToolCall("toolu_2", "lookup_invoice", ['{"id": ', '"INV-']),
    ]
    loopback.script(Reply(text="Checking.", tool_calls=calls))
    model, _ = make()
    deltas, finals = await drain(model, ModelRequest((user("invoice?"),), tools=(LOOKUP,)))
    final = finals[0]
    assert deltas == ["Checking."] and final.stop_reason == "tool_calls"
    good, bad = final.tool_calls
    assert (good.id, good.name, dict(good.arguments), good.argument_error) == (
        "toolu_1",
        "lookup_invoice",
        {"id": "INV-42"},
        None,
    )
    assert bad.argument_error is not None and dict(bad.arguments) == {} and bad.raw_arguments == '{"id": "INV-'
    body = loopback.requests[0].body
    spec = {"name": "lookup_invoice", "description": "Find an invoice", "input_schema": LOOKUP.parameters}
    assert body["tools"] == [spec]
    assert body["tool_choice"] == {"type": "auto"}


@pytest.mark.anyio
async def test_tool_turns_on_the_wire(loopback: LoopbackServer, make: Factory) -> None:  # noqa: F811
    loopback.script(Reply(tool_calls=[ToolCall("toolu_9", "lookup_invoice", '{"id": "INV-3"}')]), Reply(text="ok"))
    model, _ = make()
    response = await model.request(ModelRequest((user("x"),), tools=(LOOKUP,), tool_choice="required"))
    (call,) = response.tool_calls
    assert (call.id, dict(call.arguments), response.stop_reason) == ("toolu_9", {"id": "INV-3"}, "tool_calls")
    assert loopback.requests[0].body["tool_choice"] == {"type": "any"}

    history = (
        user("invoice?"),
        Message("assistant", (TextPart("Checking."), ToolCallPart("toolu_9", "lookup_invoice", {"id": "INV-3"}))),
        Message("tool", (ToolResultPart("toolu_9", "lookup_invoice", "not found", is_error=True),)),
        user("and now?"),
    )
    await model.request(ModelRequest(history, tools=(LOOKUP,), tool_choice="lookup_invoice"))
    body = loopback.requests[1].body
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]  # tool + user turns merged
    assert body["messages"][1]["content"][1] == {
        "type": "tool_use",
        "id": "toolu_9",
        "name": "lookup_invoice",
        "input": {"id": "INV-3"},
    }
    result, followup = body["messages"][2]["content"]
    assert result == {"type": "tool_result", "tool_use_id": "toolu_9", "content": "not found", "is_error": True}
    assert followup == {"type": "text", "text": "and now?"}
    assert body["tool_choice"] == {"type": "tool", "name": "lookup_invoice"}


@pytest.mark.anyio
@pytest.mark.parametrize("streamed", [False, True])
async def test_tool_turns_of_a_request_without_tools_are_sent_as_text(
    loopback: LoopbackServer,  # noqa: F811
    make: Factory,
    streamed: bool,
) -> None:
    # Anthropic refuses tool_use/tool_result blocks in a request that declares no tools (HTTP 400):
    # a conversation that used another agent's tools reaches an agent with none.
    loopback.script(Reply(text="Anything else?"))
    model, _ = make()
    history = (
        user("invoice?"),
        Message("assistant", (TextPart("Checking."), ToolCallPart("toolu_9", "lookup_invoice", {"id": "INV-3"}))),
        Message("tool", (ToolResultPart("toolu_9", "lookup_invoice", "not found", is_error=True),)),
        Message("assistant", (TextPart("No such invoice."),)),
        user("thanks"),
    )
    request = ModelRequest(history)
    if streamed:
        response = [item async for item in model.stream(request)][-1]
    else:
        response = await model.request(request)
    assert response.text == "Anything else?"
    body = loopback.requests[0].body
    assert "tools" not in body
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user", "assistant", "user"]
    assert body["messages"][1]["content"] == [
        {"type": "text", "text": "Checking."},
        {"type": "text", "text": '[called lookup_invoice({"id": "INV-3"})]'},
    ]
    assert body["messages"][2]["content"] == [{"type": "text", "text": "[error from lookup_invoice: not found]"}]


@pytest.mark.anyio
@pytest.mark.parametrize("streamed", [False, True])
async def test_response_format_is_a_forced_tool_returned_as_json_text(
    loopback: LoopbackServer,  # noqa: F811
    make: Factory,
    streamed: bool,
) -> None:
    verdict = {"route": "billing", "confidence": 0.93}
    loopback.script(Reply(tool_calls=[ToolCall("toolu_c", "classification", json.dumps(verdict))]))
    model, _ = make()
    schema = {"type": "object", "properties": {"route": {"type": "string"}, "confidence": {"type": "number"}}}
    fmt = ResponseFormat("classification", schema)
    request = ModelRequest((user("charged twice"),), system=ROUTER_PROMPT, purpose="classify", response_format=fmt)
    response = (await drain(model, request))[1][0] if streamed else await model.request(request)
    assert json.loads(response.text) == verdict
    assert response.tool_calls == () and response.stop_reason == "end"
    body = loopback.requests[0].body
    assert body["tool_choice"] == {"type": "tool", "name": "classification"}
    assert body["tools"][-1]["input_schema"] == schema


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("wire", "stop"), [("max_tokens", "max_tokens"), ("stop_sequence", "stop_sequence"), ("refusal", "content_filter")]
)
async def test_stop_reasons(loopback: LoopbackServer, make: Factory, wire: str, stop: str) -> None:  # noqa: F811
    loopback.script(Reply(text="cut", stop=wire), Reply(text="cut", stop=wire))
    model, _ = make()
    assert (await model.request(ModelRequest((user("x"),), stop=("END",)))).stop_reason == stop
    assert (await drain(model, HELLO))[1][0].stop_reason == stop
    assert loopback.requests[0].body["stop_sequences"] == ["END"]


@pytest.mark.anyio
async def test_abandoned_stream_closes_the_connection(loopback: LoopbackServer, make: Factory) -> None:  # noqa: F811
    loopback.script(Reply(text=[f"w{i} " for i in range(200)], chunk_delay_s=0.02))
    model, _ = make()
    stream = model.stream(HELLO)
    assert await stream.__anext__() == ModelTextDelta("w0 ")
    await stream.aclose()
    assert await anyio.to_thread.run_sync(loopback.requests[0].done.wait, 10)
    assert loopback.requests[0].aborted.is_set()


@pytest.mark.anyio
async def test_api_key_never_in_repr_logs_or_errors(
    loopback: LoopbackServer,  # noqa: F811
    make: Factory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    echo = f"invalid x-api-key {FAKE_ANTHROPIC_KEY}"
    loopback.script(Status(529, message=echo), Status(401, message=echo))
    model, _ = make()
    with caplog.at_level(logging.DEBUG), pytest.raises(ModelError) as info:
        await model.request(HELLO)
    assert sent_key(loopback.requests[0].headers) == FAKE_ANTHROPIC_KEY
    logs = [r.getMessage() + repr(getattr(r, "fields", "")) for r in caplog.records]
    assert any("model.retry" in line for line in logs)
    # a logged traceback shows the SDK's own error too (the ModelError's cause): masked there as well
    chain = "".join(traceback.format_exception(info.value))
    for text in (repr(model), str(logs), str(info.value), repr(info.value.metadata), chain):
        assert FAKE_ANTHROPIC_KEY not in text
        assert FAKE_ANTHROPIC_KEY[8:20] not in text


@pytest.mark.anyio
async def test_client_built_from_the_environment(loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    monkeypatch.setenv("ANTHROPIC_API_KEY", FAKE_ANTHROPIC_KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", loopback.anthropic_base_url)
    loopback.script(Reply(text="from env"))
    async with AnthropicModel("claude-haiku-4-5") as model:
        assert (await model.request(HELLO)).text == "from env"
    assert sent_key(loopback.requests[0].headers) == FAKE_ANTHROPIC_KEY
    assert FAKE_ANTHROPIC_KEY not in repr(model)


@pytest.mark.anyio
async def test_missing_key_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(UsageError, match="ANTHROPIC_API_KEY"):
        await AnthropicModel("claude-haiku-4-5").request(HELLO)


@pytest.mark.anyio
async def test_real_endpoint_is_blocked_in_tests() -> None:
    async with anthropic.AsyncAnthropic(
        api_key=FAKE_ANTHROPIC_KEY, base_url="https://api.anthropic.com", max_retries=0
    ) as client:
        model = AnthropicModel("claude-haiku-4-5", client=client)
        with pytest.raises(RealModelCallBlocked):
            await model.request(HELLO)
        with pytest.raises(RealModelCallBlocked):
            await drain(model, HELLO)


def test_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)
    with pytest.raises(UsageError, match=r"pip install 'jeeves-router\[anthropic\]'"):
        AnthropicModel("claude-haiku-4-5")


def test_registry_resolves_anthropic_strings_without_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    model = resolve_model("anthropic:claude-haiku-4-5")
    assert isinstance(model, AnthropicModel) and model.name == "anthropic:claude-haiku-4-5"


@pytest.mark.anyio
async def test_aclose_closes_the_client_the_model_built(loopback: LoopbackServer) -> None:  # noqa: F811
    loopback.script(Reply(text="one"))
    async with AnthropicModel("m", base_url=loopback.anthropic_base_url, api_key="sk-ant-local") as model:
        assert (await model.request(HELLO)).text == "one"
        built = model._client
    assert built is not None and built.is_closed()
