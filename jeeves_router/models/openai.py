"""OpenAI Chat Completions behind the :class:`~jeeves_router.models.base.Model` port.

Chat Completions is the wire format every OpenAI-compatible server speaks, so the same
adapter drives vLLM, llama.cpp's ``llama-server``, Ollama and others through ``base_url``::

    OpenAIModel("gpt-4.1-mini")                                   # OPENAI_API_KEY from the environment
    OpenAIModel("llama3.1:8b", base_url="http://127.0.0.1:11434/v1", provider="ollama")

The SDK's own retries are switched off (``max_retries=0``, also on an injected client);
:class:`~jeeves_router.models._retry.Retrier` retries instead, so attempts never multiply.
"""

from __future__ import annotations

import os
import random
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any, Literal

from .._text import valid_json
from ..errors import ModelError, UsageError
from ..messages import Message, TextPart, ToolCallPart, ToolResultPart
from ..policies import PROVIDER_RETRY, RetryPolicy
from ..usage import Usage, with_spent_usage
from ._retry import Sleep
from ._sdk import SdkModel
from ._wire import arguments_json, tool_call_part
from .base import ModelRequest, ModelResponse, ModelStreamItem, ModelTextDelta, StopReason
from .prices import Price, cost_usd, price_for

__all__ = ["OpenAIModel"]

_FINISH: dict[str, StopReason] = {
    "stop": "end",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "max_tokens",
    "content_filter": "content_filter",
}


class OpenAIModel(SdkModel):
    """A model served over the OpenAI Chat Completions API.

    Args:
        model: The model id, e.g. ``"gpt-4.1-mini"``.
        client: An ``openai.AsyncOpenAI`` to use; its own retries are turned off. When
            omitted, one is built on first use from ``api_key``/``base_url`` or the
            ``OPENAI_API_KEY``/``OPENAI_BASE_URL`` environment variables.
        api_key: The API key (never logged or shown in ``repr``).
        base_url: An OpenAI-compatible endpoint, e.g. ``"http://127.0.0.1:8000/v1"``; no key
            is needed then unless the server asks for one.
        timeout_s: Per-request timeout of a client built here.
        retry: Attempts and backoff.
        price: This model's price, overriding :mod:`jeeves_router.models.prices`.
        provider: The name prefix (``"openai"``; e.g. ``"ollama"`` for a local server),
            used in :attr:`name`, errors and price lookups.
        max_tokens_param: Which request field carries ``max_tokens``: ``"auto"`` sends
            ``max_completion_tokens`` to api.openai.com and ``max_tokens`` elsewhere.
        stream_usage: Ask for token usage at the end of streams (``stream_options``).
        response_format: Whether the server enforces ``response_format`` JSON schemas
            (structured outputs); the LLM classifier then constrains its replies to the
            declared routes. ``None`` (auto): yes for api.openai.com, no for other servers
            (llama.cpp's ``llama_cpp.server`` 0.3.36 answers ``json_schema`` with HTTP 500);
            pass ``True`` for a server that supports it, e.g. vLLM.
        sleep: The wait between attempts (tests inject a recorder); ``anyio.sleep``.
        rng: Jitter source, e.g. ``random.Random(0)`` for repeatable delays.
    """

    sdk_module = "openai"
    extra = "openai"
    key_env = "OPENAI_API_KEY"

    def __init__(
        self,
        model: str,
        *,
        client: Any | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout_s: float = 60.0,
        retry: RetryPolicy = PROVIDER_RETRY,
        price: Price | None = None,
        provider: str = "openai",
        max_tokens_param: Literal["auto", "max_tokens", "max_completion_tokens"] = "auto",
        stream_usage: bool = True,
        response_format: bool | None = None,
        sleep: Sleep | None = None,
        rng: random.Random | None = None,
    ) -> None:
        super().__init__(
            model,
            provider=provider,
            client=client,
            api_key=api_key,
            base_url=base_url,
            timeout_s=timeout_s,
            retry=retry,
            price=price,
            sleep=sleep,
            rng=rng,
        )
        self._max_tokens_param = max_tokens_param
        self._stream_usage = stream_usage
        self._response_format = response_format

    def __repr__(self) -> str:
        return self._repr(provider=self.provider)

    # -- client -----------------------------------------------------------------------------

    def _build_client(self, sdk: Any) -> Any:
        base_url = self._base_url or os.environ.get("OPENAI_BASE_URL") or None
        api_key = self._api_key or os.environ.get("OPENAI_API_KEY")
        if not api_key:
            if base_url is None:
                raise UsageError(
                    f"{self._name} needs an API key: set OPENAI_API_KEY or pass api_key=..., "
                    "or pass base_url=... for a local OpenAI-compatible server"
                )
            api_key = "no-key"  # local servers ignore it, but the SDK insists on one
        return sdk.AsyncOpenAI(api_key=api_key, base_url=base_url, timeout=self._timeout_s, max_retries=0)

    # -- request ----------------------------------------------------------------------------

    def _params(self, request: ModelRequest) -> dict[str, Any]:
        # The system prompt and tools come first and unchanged, so repeated classifier calls
        # share a static prefix that OpenAI's automatic prompt caching can reuse.
        messages: list[dict[str, Any]] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        for message in request.messages:
            messages.extend(_to_openai(message))
        params: dict[str, Any] = {"model": self.model, "messages": messages}
        if request.tools:
            params["tools"] = [
                {
                    "type": "function",
                    "function": {"name": t.name, "description": t.description, "parameters": dict(t.parameters)},
                }
                for t in request.tools
            ]
            if request.tool_choice in ("auto", "required", "none"):
                params["tool_choice"] = request.tool_choice
            else:
                params["tool_choice"] = {"type": "function", "function": {"name": request.tool_choice}}
        temperature = request.temperature
        if temperature is None and request.purpose == "classify":
            temperature = 0.0
        if temperature is not None:
            params["temperature"] = temperature
        if request.max_tokens is not None:
            params[self._max_tokens_field()] = request.max_tokens
        if request.stop:
            params["stop"] = list(request.stop)
        if request.response_format is not None:
            params["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": request.response_format.name,
                    "schema": dict(request.response_format.schema),
                    "strict": True,
                },
            }
        # Whatever it came from (a tool's result, a reply sent back, context in a prompt), text
        # the client cannot encode as UTF-8 is repaired here, where every request leaves.
        return valid_json(params)

    def _is_official_api(self) -> bool:
        base_url = str(getattr(self._client, "base_url", None) or self._base_url or "https://api.openai.com/v1")
        return "api.openai.com" in base_url

    @property
    def supports_response_format(self) -> bool:
        """Whether ``ModelRequest.response_format`` is sent and enforced (see ``response_format``)."""
        if self._response_format is not None:
            return self._response_format
        return self._is_official_api()

    def _max_tokens_field(self) -> str:
        if self._max_tokens_param != "auto":
            return self._max_tokens_param
        return "max_completion_tokens" if self._is_official_api() else "max_tokens"

    def _usage(self, raw: Any) -> Usage:
        if raw is None:
            return Usage(requests=1, cost_usd=None)
        input_tokens = int(getattr(raw, "prompt_tokens", 0) or 0)
        output_tokens = int(getattr(raw, "completion_tokens", 0) or 0)
        details = getattr(raw, "prompt_tokens_details", None)
        cached = int(getattr(details, "cached_tokens", 0) or 0) if details is not None else 0
        price = self._price or price_for(self._name)
        cost = cost_usd(price, input_tokens=input_tokens, output_tokens=output_tokens, cached_input_tokens=cached)
        return Usage(input_tokens, output_tokens, cached, 1, cost)

    # -- Model port -------------------------------------------------------------------------

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Answer ``request`` with one Chat Completions call (retried on retriable failures)."""

        async def once(attempt: int) -> ModelResponse:
            client = self._client_for_call()
            completion = await client.chat.completions.create(**self._params(request))
            return self._parse(completion)

        return await self._retrier.call(once)

    def stream(self, request: ModelRequest) -> AsyncGenerator[ModelStreamItem, None]:
        """Stream ``request``: text deltas, then one final :class:`ModelResponse`."""

        def open_stream(attempt: int) -> AsyncIterator[ModelStreamItem]:
            return self._stream_once(request)

        return self._retrier.stream(open_stream)

    def _parse(self, completion: Any) -> ModelResponse:
        if not completion.choices:
            raise ModelError(
                f"{self._name}: the response has no choices",
                severity="retriable",
                provider=self.provider,
                metadata={"kind": "malformed_response"},
            )
        choice = completion.choices[0]
        message = choice.message
        parts: list[TextPart | ToolCallPart] = []
        text = message.content or getattr(message, "refusal", None) or ""
        if text:
            parts.append(TextPart(text))
        for call in message.tool_calls or ():
            function = getattr(call, "function", None)
            if function is not None:
                parts.append(tool_call_part(call.id, function.name, function.arguments))
        stop = _stop_reason(choice.finish_reason, refused=bool(getattr(message, "refusal", None)))
        return ModelResponse(tuple(parts), self._usage(completion.usage), stop, self._name)

    async def _stream_once(self, request: ModelRequest) -> AsyncGenerator[ModelStreamItem, None]:
        client = self._client_for_call()
        params = self._params(request)
        params["stream"] = True
        if self._stream_usage:
            params["stream_options"] = {"include_usage": True}
        stream = await client.chat.completions.create(**params)
        usage_raw: Any = None  # the usage chunk, which comes last (a broken stream's cost is unknown)
        try:
            texts: list[str] = []
            calls: list[dict[str, Any]] = []  # in the order they start
            open_calls: dict[Any, dict[str, Any]] = {}  # the call each wire index is streaming now
            finish: str | None = None
            refused = False
            async for chunk in stream:
                if getattr(chunk, "usage", None) is not None:
                    usage_raw = chunk.usage
                for choice in chunk.choices or ():
                    if choice.index != 0:
                        continue
                    delta = choice.delta
                    piece = getattr(delta, "content", None) or getattr(delta, "refusal", None)
                    refused = refused or bool(getattr(delta, "refusal", None))
                    if piece:
                        texts.append(piece)
                        yield ModelTextDelta(piece)
                    for fragment in getattr(delta, "tool_calls", None) or ():
                        slot = open_calls.get(fragment.index)
                        # Some compatible servers (Ollama) stream every call of a parallel batch
                        # under index 0: a fragment with another call's id starts a new call.
                        if slot is None or (fragment.id and slot["id"] and fragment.id != slot["id"]):
                            slot = {"id": None, "name": "", "arguments": [], "n": len(calls)}
                            open_calls[fragment.index] = slot
                            calls.append(slot)
                        if fragment.id:
                            slot["id"] = fragment.id
                        function = getattr(fragment, "function", None)
                        if function is not None:
                            if function.name:
                                slot["name"] += function.name
                            if function.arguments:
                                slot["arguments"].append(function.arguments)
                    if choice.finish_reason is not None:
                        finish = choice.finish_reason
            if finish is None:
                raise ModelError(
                    f"{self._name}: the stream ended before the model finished",
                    severity="retriable",
                    provider=self.provider,
                    metadata={"kind": "truncated_stream"},
                )
            parts: list[TextPart | ToolCallPart] = [TextPart("".join(texts))] if texts else []
            for slot in calls:
                call_id = slot["id"] or f"call_{slot['n']}"
                parts.append(tool_call_part(call_id, slot["name"], "".join(slot["arguments"])))
            yield ModelResponse(tuple(parts), self._usage(usage_raw), _stop_reason(finish, refused), self._name)
        except Exception as exc:  # the request was sent: it counts, with any usage the provider reported
            with_spent_usage(exc, self._usage(usage_raw), replace=True)
            raise
        finally:
            await stream.close()


def _stop_reason(finish: str | None, refused: bool = False) -> StopReason | None:
    if refused:
        return "content_filter"
    if finish is None:
        return None
    return _FINISH.get(finish, "other")


def _to_openai(message: Message) -> list[dict[str, Any]]:
    """One conversation turn as Chat Completions messages (tool results become ``tool`` turns)."""
    out: list[dict[str, Any]] = []
    texts = [p.text for p in message.parts if isinstance(p, TextPart)]
    calls = [p for p in message.parts if isinstance(p, ToolCallPart)]
    results = [p for p in message.parts if isinstance(p, ToolResultPart)]
    for result in results:
        content = f"Error: {result.content}" if result.is_error else result.content
        out.append({"role": "tool", "tool_call_id": result.call_id, "content": content})
    if message.role == "assistant":
        if texts or calls:
            entry: dict[str, Any] = {"role": "assistant", "content": "".join(texts) or None}
            if calls:
                entry["tool_calls"] = [
                    {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": arguments_json(c)}}
                    for c in calls
                ]
            out.append(entry)
    elif texts:
        out.append({"role": "user", "content": "".join(texts)})
    return out
