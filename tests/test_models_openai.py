"""OpenAIModel on the real ``openai`` client, talking to the loopback server."""

from __future__ import annotations

import logging
import random
import sys
import traceback
from collections.abc import Callable
from typing import Any

import anyio
import openai
import pytest

from jeeves_router.errors import ModelError, RealModelCallBlocked, StreamInterrupted, UsageError
from jeeves_router.messages import Message, TextPart, ToolCallPart, ToolResultPart, user
from jeeves_router.models.base import ModelRequest, ModelResponse, ModelTextDelta, ResponseFormat, ToolSpec
from jeeves_router.models.openai import OpenAIModel
from jeeves_router.models.prices import Price, cost_usd, price_for
from jeeves_router.models.registry import resolve_model
from jeeves_router.policies import RetryPolicy
from tests.loopback import (
    FAKE_OPENAI_KEY,
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


class SleepRecorder:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


Factory = Callable[..., tuple[OpenAIModel, SleepRecorder]]


@pytest.fixture
def make(loopback: LoopbackServer) -> Factory:  # noqa: F811
    def build(timeout: float = 10.0, client: Any = None, **kwargs: Any) -> tuple[OpenAIModel, SleepRecorder]:
        sleep = SleepRecorder()
        kwargs.setdefault("retry", POLICY)
        model = OpenAIModel(
            "gpt-4.1-mini",
            client=client or loopback.openai_client(timeout=timeout),
            sleep=sleep,
            rng=random.Random(0),
            **kwargs,
        )
        return model, sleep

    return build


async def drain(model: OpenAIModel, request: ModelRequest) -> tuple[list[str], list[ModelResponse]]:
    deltas: list[str] = []
    finals: list[ModelResponse] = []
    async for item in model.stream(request):
        assert not finals, "nothing may follow the final ModelResponse"
        if isinstance(item, ModelTextDelta):
            deltas.append(item.text)
        else:
            finals.append(item)
    return deltas, finals


@pytest.mark.anyio
async def test_request_text_usage_cost_and_system_prompt_first(loopback: LoopbackServer, make: Factory) -> None:  # noqa: F811
    loopback.script(Reply(text="Hello!", input_tokens=2000, output_tokens=7, cached_tokens=1024))
    model, _ = make()
    response = await model.request(HELLO)
    assert response.text == "Hello!"
    assert response.stop_reason == "end"
    assert response.model_name == "openai:gpt-4.1-mini"
    usage = response.usage
    assert (usage.input_tokens, usage.output_tokens, usage.cached_input_tokens, usage.requests) == (2000, 7, 1024, 1)
    expected = cost_usd(price_for("openai:gpt-4.1-mini"), input_tokens=2000, output_tokens=7, cached_input_tokens=1024)
    assert expected is not None and usage.cost_usd == pytest.approx(expected)
    sent = loopback.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.body["messages"][0] == {"role": "system", "content": "You are terse."}
    assert sent.body["messages"][1] == {"role": "user", "content": "hi"}
    assert "stream" not in sent.body


@pytest.mark.anyio
async def test_unknown_model_cost_is_none_and_price_override_applies(loopback: LoopbackServer) -> None:  # noqa: F811
    loopback.script(Reply(text="a"), Reply(text="b", input_tokens=1_000_000, output_tokens=0))
    unknown = OpenAIModel("my-local-llama", client=loopback.openai_client(), provider="vllm")
    assert (await unknown.request(HELLO)).usage.cost_usd is None
    priced = OpenAIModel("my-local-llama", client=loopback.openai_client(), price=Price(input=0.2, output=0.4))
    assert (await priced.request(HELLO)).usage.cost_usd == pytest.approx(0.2)


@pytest.mark.anyio
async def test_classify_request_is_deterministic_short_and_keeps_a_static_prefix(
    loopback: LoopbackServer,  # noqa: F811
    make: Factory,
) -> None:
    loopback.script(Reply(text="route: billing"), Reply(text="route: general"))
    model, _ = make()
    prompt = "Classify the message into one route: billing, technical, general."
    for text in ("I was charged twice", "hello there"):
        request = ModelRequest((user(text),), system=prompt, purpose="classify", temperature=0, max_tokens=16)
        await model.request(request)
    first, second = (r.body for r in loopback.requests)
    for body in (first, second):
        assert body["temperature"] == 0
        assert body["max_tokens"] == 16  # a non-OpenAI host gets the classic field name
        assert body["messages"][0] == {"role": "system", "content": prompt}
    assert first["messages"][:-1] == second["messages"][:-1]


@pytest.mark.anyio
async def test_official_host_gets_max_completion_tokens(loopback: LoopbackServer) -> None:  # noqa: F811
    loopback.script(Reply(text="x"))
    model = OpenAIModel("gpt-4.1-mini", client=loopback.openai_client(), max_tokens_param="max_completion_tokens")
    await model.request(ModelRequest((user("hi"),), max_tokens=5, purpose="classify"))
    body = loopback.requests[0].body
    assert body["max_completion_tokens"] == 5 and "max_tokens" not in body
    assert body["temperature"] == 0  # classify requests default to temperature 0


@pytest.mark.anyio
async def test_429_honours_retry_after_capped_by_max_delay(loopback: LoopbackServer, make: Factory) -> None:  # noqa: F811
    loopback.script(
        Status(429, headers={"retry-after": "2"}),
        Status(429, headers={"retry-after": "60"}),
        Reply(text="ok"),
    )
    model, sleep = make()
    assert (await model.request(HELLO)).text == "ok"
    assert len(loopback.requests) == 3
    assert sleep.delays == [2.0, 5.0]


@pytest.mark.anyio
@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503])
async def test_retriable_statuses_use_every_attempt(loopback: LoopbackServer, make: Factory, status: int) -> None:  # noqa: F811
    loopback.script(*[Status(status)] * 3)
    model, sleep = make()
    with pytest.raises(ModelError) as info:
        await model.request(HELLO)
    err = info.value
    assert len(loopback.requests) == 3
    assert sleep.delays == [0.5, 1.0]
    assert (err.severity, err.status_code, err.attempt, err.provider) == ("retriable", status, 3, "openai")
    assert isinstance(err.__cause__, openai.APIStatusError)
    assert err.__cause__.status_code == status


@pytest.mark.anyio
@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
async def test_client_errors_are_critical_and_not_retried(loopback: LoopbackServer, make: Factory, status: int) -> None:  # noqa: F811
    loopback.script(Status(status), Reply(text="never used"))
    model, sleep = make()
    with pytest.raises(ModelError) as info:
        await model.request(HELLO)
    assert len(loopback.requests) == 1
    assert sleep.delays == []
    assert (info.value.severity, info.value.status_code) == ("critical", status)
    assert isinstance(info.value.__cause__, openai.APIStatusError)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("status", "code", "message", "kind"),
    [
        (400, "context_length_exceeded", "This model's maximum context length is 128000 tokens.", "context_length"),
        (
            400,
            "content_filter",
            "The response was filtered due to the prompt triggering our content policy.",
            "content_filter",
        ),
    ],
)
async def test_context_length_and_content_filter_are_named_and_critical(
    loopback: LoopbackServer,  # noqa: F811
    make: Factory,
    status: int,
    code: str,
    message: str,
    kind: str,
) -> None:
    loopback.script(Status(status, code=code, message=message))
    model, _ = make()
    with pytest.raises(ModelError) as info:
        await model.request(HELLO)
    assert (info.value.severity, info.value.metadata["kind"]) == ("critical", kind)
    assert len(loopback.requests) == 1


@pytest.mark.anyio
async def test_connection_reset_before_headers_is_retried(loopback: LoopbackServer, make: Factory) -> None:  # noqa: F811
    loopback.script(Reset(), Reset(), Reset())
    model, sleep = make()
    with pytest.raises(ModelError) as info:
        await model.request(HELLO)
    assert len(loopback.requests) == 3 and len(sleep.delays) == 2
    assert (info.value.severity, info.value.metadata["kind"]) == ("retriable", "connection")
    assert isinstance(info.value.__cause__, openai.APIConnectionError)


@pytest.mark.anyio
async def test_read_timeout_is_retried_then_succeeds(loopback: LoopbackServer, make: Factory) -> None:  # noqa: F811
    model, sleep = make(timeout=0.5)
    loopback.script(hang_once(model._client), Reply(text="late but fine"))  # the adapter's copy of the client
    assert (await model.request(HELLO)).text == "late but fine"
    assert len(loopback.requests) == 2 and sleep.delays == [0.5]
    assert loopback.requests[0].aborted.is_set()  # the client gave up on the hanging request


@pytest.mark.anyio
async def test_read_timeout_error_chains_the_sdk_timeout(loopback: LoopbackServer, make: Factory) -> None:  # noqa: F811
    loopback.script(Hang())
    model, _ = make(timeout=0.3, retry=RetryPolicy(max_attempts=1))
    with pytest.raises(ModelError) as info:
        await model.request(HELLO)
    assert info.value.metadata["kind"] == "timeout"
    assert isinstance(info.value.__cause__, openai.APITimeoutError)


@pytest.mark.anyio
async def test_sdk_retries_are_off_even_on_an_injected_client(loopback: LoopbackServer, make: Factory) -> None:  # noqa: F811
    loopback.script(*[Status(503)] * 9)
    async with openai.AsyncOpenAI(api_key=FAKE_OPENAI_KEY, base_url=loopback.openai_base_url, max_retries=3) as sdk:
        model, _ = make(client=sdk)
        with pytest.raises(ModelError):
            await model.request(HELLO)
    assert len(loopback.requests) == POLICY.max_attempts  # not 3 x 4


@pytest.mark.anyio
async def test_stream_text_then_exactly_one_final_response(loopback: LoopbackServer, make: Factory) -> None:  # noqa: F811
    loopback.script(Reply(text=["The ", "API ", "is ", "up."], cached_tokens=3))
    model, _ = make()
    deltas, finals = await drain(model, HELLO)
    assert deltas == ["The ", "API ", "is ", "up."]
    assert len(finals) == 1 and finals[0].text == "The API is up."
    assert finals[0].usage.cached_input_tokens == 3 and finals[0].usage.cost_usd is not None
    assert loopback.requests[0].body["stream_options"] == {"include_usage": True}


@pytest.mark.anyio
async def test_disconnect_after_text_raises_stream_interrupted_without_duplicates(
    loopback: LoopbackServer,  # noqa: F811
    make: Factory,
) -> None:
    loopback.script(Reply(text=["one ", "two ", "three ", "four"], disconnect_after=3), Reply(text="never sent"))
    model, sleep = make()
    deltas: list[str] = []
    with pytest.raises(StreamInterrupted) as info:
        async for item in model.stream(HELLO):
            if isinstance(item, ModelTextDelta):
                deltas.append(item.text)
    assert deltas == ["one ", "two "]  # events: role, "one ", "two ", then the cut
    assert len(loopback.requests) == 1 and sleep.delays == []
    assert isinstance(info.value.__cause__, openai.APIConnectionError)


@pytest.mark.anyio
async def test_disconnect_before_any_text_is_retried_once_cleanly(loopback: LoopbackServer, make: Factory) -> None:  # noqa: F811
    loopback.script(Reply(text=["x", "y"], disconnect_after=1), Reply(text=["Hel", "lo"]))
    model, sleep = make()
    deltas, finals = await drain(model, HELLO)
    assert deltas == ["Hel", "lo"] and finals[0].text == "Hello"
    assert len(loopback.requests) == 2 and sleep.delays == [0.5]


@pytest.mark.anyio
async def test_malformed_sse_before_text_is_retried_after_text_interrupts(
    loopback: LoopbackServer,  # noqa: F811
    make: Factory,
) -> None:
    loopback.script(Reply(text=["a", "b"], malformed_at=0), Reply(text=["a", "b"]))
    model, _ = make()
    deltas, _ = await drain(model, HELLO)
    assert deltas == ["a", "b"] and len(loopback.requests) == 2

    loopback.script(Reply(text=["a", "b", "c"], malformed_at=2))
    with pytest.raises(StreamInterrupted) as info:
        await drain(model, HELLO)
    assert info.value.metadata["kind"] == "malformed_response"
    assert len(loopback.requests) == 3


@pytest.mark.anyio
async def test_stream_cut_short_cleanly_is_a_retriable_error(loopback: LoopbackServer, make: Factory) -> None:  # noqa: F811
    loopback.script(Reply(text="abc", truncate_after=1), Reply(text="abc"))
    model, _ = make()
    deltas, finals = await drain(model, HELLO)
    assert deltas == ["abc"] and len(finals) == 1 and len(loopback.requests) == 2


@pytest.mark.anyio
async def test_in_stream_error_before_text_is_retried(loopback: LoopbackServer, make: Factory) -> None:  # noqa: F811
    loopback.script(Reply(text="x", error_after=1, error_type="server_error"), Reply(text="fine"))
    model, sleep = make()
    deltas, _ = await drain(model, HELLO)
    assert deltas == ["fine"] and sleep.delays == [0.5]


@pytest.mark.anyio
async def test_streamed_tool_call_fragments_are_assembled(loopback: LoopbackServer, make: Factory) -> None:  # noqa: F811
    calls = [
        ToolCall("call_1", "lookup_invoice", ['{"id"', ': "INV', '-42"}']),
        ToolCall("call_2", "lookup_invoice", ["{", '"id": "INV-7"', "}"]),
    ]
    loopback.script(Reply(text="Let me check.", tool_calls=calls))
    model, _ = make()
    request = ModelRequest((user("where is my invoice"),), tools=(LOOKUP,))
    deltas, finals = await drain(model, request)
    final = finals[0]
    assert deltas == ["Let me check."]
    assert final.stop_reason == "tool_calls"
    assert [(c.id, c.name, dict(c.arguments)) for c in final.tool_calls] == [
        ("call_1", "lookup_invoice", {"id": "INV-42"}),
        ("call_2", "lookup_invoice", {"id": "INV-7"}),
    ]
    assert final.tool_calls[0].raw_arguments == '{"id": "INV-42"}'
    body = loopback.requests[0].body
    assert body["tools"][0]["function"]["name"] == "lookup_invoice"
    assert body["tool_choice"] == "auto"


@pytest.mark.anyio
async def test_parallel_tool_calls_streamed_under_one_index_stay_apart(loopback: LoopbackServer, make: Factory) -> None:  # noqa: F811
    # Ollama's OpenAI-compatible stream gives every call of a parallel batch index 0; the ids differ.
    calls = [
        ToolCall("call_1", "lookup_invoice", ['{"id"', ': "INV-42"}']),
        ToolCall("call_2", "lookup_invoice", ['{"id": ', '"INV-7"}']),
    ]
    loopback.script(Reply(tool_calls=calls, reuse_tool_index=True))
    model, _ = make()
    _, finals = await drain(model, ModelRequest((user("where are my invoices"),), tools=(LOOKUP,)))
    assert [(c.id, c.name, dict(c.arguments), c.argument_error) for c in finals[0].tool_calls] == [
        ("call_1", "lookup_invoice", {"id": "INV-42"}, None),
        ("call_2", "lookup_invoice", {"id": "INV-7"}, None),
    ]


@pytest.mark.anyio
@pytest.mark.parametrize("streamed", [False, True])
async def test_malformed_tool_json_becomes_an_argument_error(
    loopback: LoopbackServer,  # noqa: F811
    make: Factory,
    streamed: bool,
) -> None:
    loopback.script(Reply(tool_calls=[ToolCall("call_9", "lookup_invoice", ['{"id": ', '"INV-1"'])]))
    model, _ = make()
    request = ModelRequest((user("x"),), tools=(LOOKUP,))
    response = (await drain(model, request))[1][0] if streamed else await model.request(request)
    (call,) = response.tool_calls
    assert call.argument_error is not None and "not valid JSON" in call.argument_error
    assert dict(call.arguments) == {}
    assert call.raw_arguments == '{"id": "INV-1"'


@pytest.mark.anyio
async def test_non_object_tool_arguments_are_an_argument_error(loopback: LoopbackServer, make: Factory) -> None:  # noqa: F811
    loopback.script(Reply(tool_calls=[ToolCall("c", "lookup_invoice", "[1, 2]")]))
    model, _ = make()
    (call,) = (await model.request(ModelRequest((user("x"),), tools=(LOOKUP,)))).tool_calls
    assert call.argument_error is not None and "JSON object" in call.argument_error


@pytest.mark.anyio
async def test_tool_turns_forced_tool_and_response_format_on_the_wire(loopback: LoopbackServer, make: Factory) -> None:  # noqa: F811
    loopback.script(Reply(text="done"), Reply(text='{"route": "billing"}'))
    model, _ = make()
    bad = ToolCallPart("call_2", "lookup_invoice", {}, raw_arguments="{oops", argument_error="not valid JSON")
    history = (
        user("invoice?"),
        Message("assistant", (TextPart("Checking."), ToolCallPart("call_1", "lookup_invoice", {"id": "INV-1"}), bad)),
        Message(
            "tool",
            (
                ToolResultPart("call_1", "lookup_invoice", "paid"),
                ToolResultPart("call_2", "lookup_invoice", "arguments were not valid JSON", is_error=True),
            ),
        ),
    )
    await model.request(ModelRequest(history, tools=(LOOKUP,), tool_choice="lookup_invoice"))
    body = loopback.requests[0].body
    assistant, first_result, second_result = body["messages"][1:]
    assert assistant["content"] == "Checking."
    assert [c["function"]["arguments"] for c in assistant["tool_calls"]] == ['{"id":"INV-1"}', "{oops"]
    assert first_result == {"role": "tool", "tool_call_id": "call_1", "content": "paid"}
    assert second_result["tool_call_id"] == "call_2" and second_result["content"].startswith("Error:")
    assert body["tool_choice"] == {"type": "function", "function": {"name": "lookup_invoice"}}

    schema = {"type": "object", "properties": {"route": {"type": "string"}}, "required": ["route"]}
    fmt = ResponseFormat("classification", schema)
    response = await model.request(ModelRequest((user("charged twice"),), response_format=fmt, purpose="classify"))
    assert response.text == '{"route": "billing"}'
    sent = loopback.requests[1].body["response_format"]
    assert sent == {"type": "json_schema", "json_schema": {"name": "classification", "schema": schema, "strict": True}}


@pytest.mark.anyio
@pytest.mark.parametrize(("finish", "stop"), [("length", "max_tokens"), ("content_filter", "content_filter")])
async def test_stop_reasons(loopback: LoopbackServer, make: Factory, finish: str, stop: str) -> None:  # noqa: F811
    loopback.script(Reply(text="cut", stop=finish), Reply(text="cut", stop=finish))
    model, _ = make()
    assert (await model.request(HELLO)).stop_reason == stop
    assert (await drain(model, HELLO))[1][0].stop_reason == stop


@pytest.mark.anyio
async def test_abandoned_stream_closes_the_connection(loopback: LoopbackServer, make: Factory) -> None:  # noqa: F811
    loopback.script(Reply(text=[f"w{i} " for i in range(200)], chunk_delay_s=0.02))
    model, _ = make()
    stream = model.stream(HELLO)
    first = await stream.__anext__()
    assert first == ModelTextDelta("w0 ")
    await stream.aclose()
    assert await anyio.to_thread.run_sync(loopback.requests[0].done.wait, 10)
    assert loopback.requests[0].aborted.is_set()


@pytest.mark.anyio
async def test_api_key_never_in_repr_logs_or_errors(
    loopback: LoopbackServer,  # noqa: F811
    make: Factory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    echo = f"Incorrect API key provided: {FAKE_OPENAI_KEY}."
    loopback.script(Status(503, message=echo), Status(401, message=echo))
    model, _ = make()
    with caplog.at_level(logging.DEBUG), pytest.raises(ModelError) as info:
        await model.request(HELLO)
    assert loopback.requests[0].headers["authorization"] == f"Bearer {FAKE_OPENAI_KEY}"  # it was sent ...
    logs = [r.getMessage() + repr(getattr(r, "fields", "")) for r in caplog.records]
    assert any("model.retry" in line for line in logs)  # ... the retry and the failure were logged ...
    # a logged traceback shows the SDK's own error too (the ModelError's cause): masked there as well
    chain = "".join(traceback.format_exception(info.value))
    for text in (repr(model), str(logs), str(info.value), repr(info.value.metadata), chain):
        assert FAKE_OPENAI_KEY not in text  # ... but never shown
        assert FAKE_OPENAI_KEY[8:20] not in text


@pytest.mark.anyio
async def test_client_built_from_the_environment(loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_OPENAI_KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", loopback.openai_base_url)
    loopback.script(Reply(text="from env"))
    async with OpenAIModel("gpt-4.1-mini") as model:
        assert (await model.request(HELLO)).text == "from env"
    assert loopback.requests[0].headers["authorization"] == f"Bearer {FAKE_OPENAI_KEY}"
    assert FAKE_OPENAI_KEY not in repr(model)


@pytest.mark.anyio
async def test_local_server_needs_no_key(loopback: LoopbackServer, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    loopback.script(Reply(text="local"))
    async with OpenAIModel("llama3.1:8b", base_url=loopback.openai_base_url, provider="ollama") as model:
        assert model.name == "ollama:llama3.1:8b"
        assert (await model.request(HELLO)).text == "local"


@pytest.mark.anyio
async def test_missing_key_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    model = OpenAIModel("gpt-4.1-mini")  # constructing is fine; calling names the fix
    with pytest.raises(UsageError, match="OPENAI_API_KEY"):
        await model.request(HELLO)


@pytest.mark.anyio
async def test_real_endpoint_is_blocked_in_tests() -> None:
    real = "https://api.openai.com/v1"
    async with openai.AsyncOpenAI(api_key=FAKE_OPENAI_KEY, base_url=real, max_retries=0) as client:
        model = OpenAIModel("gpt-4.1-mini", client=client)
        with pytest.raises(RealModelCallBlocked):
            await model.request(HELLO)
        with pytest.raises(RealModelCallBlocked):
            await drain(model, HELLO)


@pytest.mark.anyio
async def test_compatible_server_in_stream_error_is_mapped(loopback: LoopbackServer) -> None:  # noqa: F811
    loopback.script(Reply(text="x", error_after=1, error_type="server_error"), Reply(text="fine"))
    sleep = SleepRecorder()
    model = OpenAIModel("qwen2.5", client=loopback.openai_client(), provider="vllm", retry=POLICY, sleep=sleep)
    deltas, _ = await drain(model, HELLO)
    assert deltas == ["fine"] and sleep.delays == [0.5]


@pytest.mark.anyio
async def test_env_base_url_decides_the_max_tokens_field(
    loopback: LoopbackServer,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", loopback.openai_base_url)
    loopback.script(Reply(text="x"))
    async with OpenAIModel("llama3.1:8b") as model:
        await model.request(ModelRequest((user("hi"),), max_tokens=7))
    assert loopback.requests[0].body["max_tokens"] == 7


def test_missing_sdk_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(UsageError, match=r"pip install 'jeeves-router\[openai\]'"):
        OpenAIModel("gpt-4.1-mini")


def test_registry_resolves_openai_strings_without_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    model = resolve_model("openai:gpt-4.1-nano")
    assert isinstance(model, OpenAIModel) and model.name == "openai:gpt-4.1-nano"


@pytest.mark.anyio
async def test_aclose_closes_the_client_the_model_built_and_not_a_given_one(loopback: LoopbackServer) -> None:  # noqa: F811
    loopback.script(Reply(text="one"), Reply(text="two"), Reply(text="three"))
    async with OpenAIModel("m", base_url=loopback.openai_base_url, api_key="sk-local") as model:
        assert (await model.request(HELLO)).text == "one"
        built = model._client
    assert built is not None and built.is_closed()  # its pooled connections are gone
    assert (await model.request(HELLO)).text == "two"  # a later call builds a new client
    await model.aclose()
    await model.aclose()  # closing twice is harmless
    given = loopback.openai_client()
    model = OpenAIModel("m", client=given)
    assert (await model.request(HELLO)).text == "three"
    await model.aclose()
    assert not given.is_closed()  # the caller's client is the caller's to close
    await given.close()
