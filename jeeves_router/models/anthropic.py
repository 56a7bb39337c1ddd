"""Anthropic Messages behind the :class:`~jeeves_router.models.base.Model` port.

::

    AnthropicModel("claude-haiku-4-5")        # ANTHROPIC_API_KEY from the environment

Classifier requests (``purpose="classify"``) mark the system prompt cacheable
(``cache_control: ephemeral``), so the static routing prompt is billed at the cache-read
rate on repeated calls. A ``response_format`` is honoured by forcing a tool whose input
schema is that format; its input comes back as the reply's JSON text. The SDK's own
retries are switched off; :class:`~jeeves_router.models._retry.Retrier` retries instead.
"""

from __future__ import annotations

import inspect
import json
import os
import random
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from dataclasses import replace
from typing import Any, Literal

from .._text import valid_json
from ..errors import ModelError, UsageError
from ..messages import Message, Part, TextPart, ToolCallPart, ToolResultPart
from ..policies import PROVIDER_RETRY, RetryPolicy
from ..usage import Usage, with_spent_usage
from ._retry import Sleep
from ._sdk import SdkModel
from ._wire import tool_call_part
from .base import ModelRequest, ModelResponse, ModelStreamItem, ModelTextDelta, StopReason
from .prices import Price, cost_usd, price_for

__all__ = ["AnthropicModel"]

_STOP: dict[str, StopReason] = {
    "end_turn": "end",
    "tool_use": "tool_calls",
    "max_tokens": "max_tokens",
    "stop_sequence": "stop_sequence",
    "refusal": "content_filter",
}


class AnthropicModel(SdkModel):
    """A model served over the Anthropic Messages API.

    Args:
        model: The model id, e.g. ``"claude-haiku-4-5"``.
        client: An ``anthropic.AsyncAnthropic`` to use; its own retries are turned off.
            When omitted, one is built on first use from ``api_key``/``base_url`` or the
            ``ANTHROPIC_API_KEY``/``ANTHROPIC_BASE_URL`` environment variables.
        api_key: The API key (never logged or shown in ``repr``).
        base_url: Another endpoint for the Messages API.
        timeout_s: Per-request timeout of a client built here.
        retry: Attempts and backoff.
        price: This model's price, overriding :mod:`jeeves_router.models.prices`.
        default_max_tokens: ``max_tokens`` when the request gives none (the API needs one).
        cache_system: Mark the system prompt cacheable for ``"classify"`` requests only,
            ``"always"`` or ``"never"``.
        send_temperature: Whether to send ``temperature``. Anthropic API version
            2026-10-21 (the default of ``anthropic`` SDK 2.x, which dropped the
            parameter) rejects sampling parameters with HTTP 400, so ``None`` (auto)
            sends it only when the client's ``messages.create`` still accepts it
            (SDK < 2, API version 2023-06-01). ``True`` forces it (through
            ``extra_body`` if needed), e.g. for a compatible proxy.
        sleep: The wait between attempts (tests inject a recorder); ``anyio.sleep``.
        rng: Jitter source, e.g. ``random.Random(0)`` for repeatable delays.
    """

    #: ``ModelRequest.response_format`` is enforced through a forced tool call.
    supports_response_format = True
    sdk_module = "anthropic"
    extra = "anthropic"
    key_env = "ANTHROPIC_API_KEY"

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
        default_max_tokens: int = 1024,
        cache_system: Literal["classify", "always", "never"] = "classify",
        send_temperature: bool | None = None,
        sleep: Sleep | None = None,
        rng: random.Random | None = None,
    ) -> None:
        if default_max_tokens < 1:
            raise UsageError(f"default_max_tokens must be >= 1, got {default_max_tokens}")
        super().__init__(
            model,
            provider="anthropic",
            client=client,
            api_key=api_key,
            base_url=base_url,
            timeout_s=timeout_s,
            retry=retry,
            price=price,
            sleep=sleep,
            rng=rng,
        )
        self._default_max_tokens = default_max_tokens
        self._cache_system = cache_system
        self._send_temperature = send_temperature

    # -- client -----------------------------------------------------------------------------

    def _build_client(self, sdk: Any) -> Any:
        api_key = self._api_key or os.environ.get("ANTHROPIC_API_KEY")
        if not api_key:
            raise UsageError(f"{self._name} needs an API key: set ANTHROPIC_API_KEY or pass api_key=...")
        base_url = self._base_url or os.environ.get("ANTHROPIC_BASE_URL") or None
        return sdk.AsyncAnthropic(api_key=api_key, base_url=base_url, timeout=self._timeout_s, max_retries=0)

    # -- request ----------------------------------------------------------------------------

    def _params(self, request: ModelRequest) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": self.model,
            "max_tokens": request.max_tokens if request.max_tokens is not None else self._default_max_tokens,
            # Anthropic refuses tool blocks in a request that declares no tool: they go as text then
            "messages": _to_anthropic(request.messages, tool_blocks=bool(request.tools or request.response_format)),
        }
        if request.system:
            cache = self._cache_system == "always" or (
                self._cache_system == "classify" and request.purpose == "classify"
            )
            if cache:
                params["system"] = [{"type": "text", "text": request.system, "cache_control": {"type": "ephemeral"}}]
            else:
                params["system"] = request.system
        tools = [
            {"name": t.name, "description": t.description, "input_schema": dict(t.parameters)} for t in request.tools
        ]
        tool_choice: dict[str, Any] | None = None
        if request.response_format is not None:
            fmt = request.response_format
            tools.append(
                {"name": fmt.name, "description": "Reply by calling this tool.", "input_schema": dict(fmt.schema)}
            )
            tool_choice = {"type": "tool", "name": fmt.name}
        elif tools:
            choice = request.tool_choice
            tool_choice = {
                "auto": {"type": "auto"},
                "required": {"type": "any"},
                "none": {"type": "none"},
            }.get(choice, {"type": "tool", "name": choice})
        if tools:
            params["tools"] = tools
        if tool_choice is not None:
            params["tool_choice"] = tool_choice
        temperature = request.temperature
        if temperature is None and request.purpose == "classify":
            temperature = 0.0
        if temperature is not None and self._temperature_supported():
            if self._sdk_accepts("temperature"):
                params["temperature"] = temperature
            else:
                params["extra_body"] = {"temperature": temperature}
        if request.stop:
            params["stop_sequences"] = list(request.stop)
        # Whatever it came from (a tool's result, a reply sent back, context in a prompt), text
        # the client cannot encode as UTF-8 is repaired here, where every request leaves.
        return valid_json(params)

    def _temperature_supported(self) -> bool:
        if self._send_temperature is not None:
            return self._send_temperature
        return self._sdk_accepts("temperature")

    def _sdk_accepts(self, parameter: str) -> bool:
        try:
            create = self._get_client().messages.create
            return parameter in inspect.signature(create).parameters
        except (TypeError, ValueError, UsageError):
            return False

    def _usage(self, raw: Mapping[str, int] | None) -> Usage:
        if raw is None:
            return Usage(requests=1, cost_usd=None)
        cache_read = raw.get("cache_read_input_tokens", 0)
        cache_write = raw.get("cache_creation_input_tokens", 0)
        # Anthropic's input_tokens exclude cached and cache-written tokens; Usage counts all.
        input_tokens = raw.get("input_tokens", 0) + cache_read + cache_write
        output_tokens = raw.get("output_tokens", 0)
        price = self._price or price_for(self._name)
        cost = cost_usd(
            price,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cached_input_tokens=cache_read,
            cache_write_tokens=cache_write,
        )
        return Usage(input_tokens, output_tokens, cache_read, 1, cost)

    # -- Model port -------------------------------------------------------------------------

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Answer ``request`` with one Messages call (retried on retriable failures)."""
        forced = request.response_format.name if request.response_format is not None else None

        async def once(attempt: int) -> ModelResponse:
            client = self._client_for_call()
            message = await client.messages.create(**self._params(request))
            parts: list[Part] = []
            for block in message.content or ():
                if block.type == "text" and block.text:
                    parts.append(TextPart(block.text))
                elif block.type == "tool_use":
                    raw = json.dumps(block.input, ensure_ascii=False)
                    parts.append(tool_call_part(block.id, block.name, raw))
            stop = _STOP.get(message.stop_reason, "other") if message.stop_reason else None
            parts, stop = _unforce(parts, stop, forced)
            return ModelResponse(tuple(parts), self._usage(_usage_dict(message.usage)), stop, self._name)

        return await self._retrier.call(once)

    def stream(self, request: ModelRequest) -> AsyncGenerator[ModelStreamItem, None]:
        """Stream ``request``: text deltas, then one final :class:`ModelResponse`."""

        def open_stream(attempt: int) -> AsyncIterator[ModelStreamItem]:
            return self._stream_once(request)

        return self._retrier.stream(open_stream)

    async def _stream_once(self, request: ModelRequest) -> AsyncGenerator[ModelStreamItem, None]:
        client = self._client_for_call()
        params = self._params(request)
        params["stream"] = True
        forced = request.response_format.name if request.response_format is not None else None
        stream = await client.messages.create(**params)
        usage: dict[str, int] = {}  # input tokens from message_start, output tokens from message_delta
        final = False  # message_delta reported the final output tokens
        try:
            blocks: dict[int, dict[str, Any]] = {}
            stop_raw: str | None = None
            finished = False
            async for event in stream:
                kind = event.type
                if kind == "message_start":
                    usage.update(_usage_dict(event.message.usage) or {})
                elif kind == "content_block_start":
                    block = event.content_block
                    if block.type == "tool_use":
                        blocks[event.index] = {"type": "tool_use", "id": block.id, "name": block.name, "json": []}
                    elif block.type == "text":
                        blocks[event.index] = {"type": "text", "text": [block.text] if block.text else []}
                        if block.text and forced is None:
                            yield ModelTextDelta(block.text)
                elif kind == "content_block_delta":
                    delta = event.delta
                    slot = blocks.get(event.index)
                    if slot is None:
                        continue
                    if delta.type == "text_delta" and slot["type"] == "text":
                        slot["text"].append(delta.text)
                        if delta.text and forced is None:
                            yield ModelTextDelta(delta.text)
                    elif delta.type == "input_json_delta" and slot["type"] == "tool_use":
                        slot["json"].append(delta.partial_json)
                elif kind == "message_delta":
                    stop_raw = event.delta.stop_reason or stop_raw
                    usage.update(_usage_dict(event.usage) or {})
                    final = True
                elif kind == "message_stop":
                    finished = True
            if not finished:
                raise ModelError(
                    f"{self._name}: the stream ended before the model finished",
                    severity="retriable",
                    provider="anthropic",
                    metadata={"kind": "truncated_stream"},
                )
            parts: list[Part] = []
            for index in sorted(blocks):
                slot = blocks[index]
                if slot["type"] == "text" and slot["text"]:
                    parts.append(TextPart("".join(slot["text"])))
                elif slot["type"] == "tool_use":
                    parts.append(tool_call_part(slot["id"], slot["name"], "".join(slot["json"])))
            stop = _STOP.get(stop_raw, "other") if stop_raw else None
            parts, stop = _unforce(parts, stop, forced)
            if forced is not None and parts and isinstance(parts[0], TextPart):
                yield ModelTextDelta(parts[0].text)
            yield ModelResponse(tuple(parts), self._usage(usage or None), stop, self._name)
        except Exception as exc:  # the request was sent: it counts, with the tokens the provider reported
            used = self._usage(usage or None)
            if not final:  # output tokens so far, not what was billed: the cost is unknown
                used = replace(used, cost_usd=None)
            with_spent_usage(exc, used, replace=True)
            raise
        finally:
            await stream.close()


def _usage_dict(raw: Any) -> dict[str, int] | None:
    if raw is None:
        return None
    out: dict[str, int] = {}
    for key in ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"):
        value = getattr(raw, key, None)
        if isinstance(value, int):
            out[key] = value
    return out


def _unforce(parts: list[Part], stop: StopReason | None, forced: str | None) -> tuple[list[Part], StopReason | None]:
    """Turn the forced response-format tool call into the reply's JSON text."""
    if forced is None:
        return parts, stop
    for part in parts:
        if isinstance(part, ToolCallPart) and part.name == forced:
            text = part.raw_arguments or json.dumps(dict(part.arguments))
            return [TextPart(text)], "end" if stop == "tool_calls" else stop
    return parts, stop


def _to_anthropic(messages: tuple[Message, ...], *, tool_blocks: bool = True) -> list[dict[str, Any]]:
    """Conversation turns as Messages API turns; tool results ride in user turns.

    Without ``tool_blocks`` (a request that declares no tools, which Anthropic refuses to see
    ``tool_use``/``tool_result`` blocks in) each call and result is a text note instead.
    """
    out: list[dict[str, Any]] = []
    for message in messages:
        role = "assistant" if message.role == "assistant" else "user"
        blocks: list[dict[str, Any]] = []
        for part in message.parts:
            if isinstance(part, TextPart):
                if part.text:
                    blocks.append({"type": "text", "text": part.text})
            elif isinstance(part, ToolCallPart) and not tool_blocks:
                args = json.dumps(dict(part.arguments), ensure_ascii=False, default=str)
                blocks.append({"type": "text", "text": f"[called {part.name}({args})]"})
            elif isinstance(part, ToolCallPart):
                # A call whose arguments were malformed is replayed with empty input; its
                # tool result carries the error the model must correct.
                blocks.append({"type": "tool_use", "id": part.id, "name": part.name, "input": dict(part.arguments)})
            elif isinstance(part, ToolResultPart) and not tool_blocks:
                what = "error from" if part.is_error else "result of"
                blocks.append({"type": "text", "text": f"[{what} {part.name}: {part.content}]"})
            elif isinstance(part, ToolResultPart):
                blocks.append(
                    {
                        "type": "tool_result",
                        "tool_use_id": part.call_id,
                        "content": part.content,
                        "is_error": part.is_error,
                    }
                )
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return out
