"""Scripted replies and their rendering in the OpenAI and Anthropic wire formats.

Used by :mod:`tests.loopback`; the shapes follow the public API references of OpenAI
Chat Completions (``chat.completion`` / ``chat.completion.chunk``) and Anthropic Messages
(``message`` and its ``message_start`` ... ``message_stop`` event stream).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    408: "Request Timeout",
    409: "Conflict",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    529: "Overloaded",
}


@dataclass(frozen=True)
class ToolCall:
    """A tool call in a scripted reply; ``arguments`` as a sequence is streamed in fragments."""

    id: str
    name: str
    arguments: str | Sequence[str] = "{}"

    @property
    def fragments(self) -> list[str]:
        return [self.arguments] if isinstance(self.arguments, str) else list(self.arguments)

    @property
    def text(self) -> str:
        return "".join(self.fragments)


@dataclass(frozen=True)
class Reply:
    """A successful answer.

    Attributes:
        text: The reply text; a sequence is streamed as those chunks.
        tool_calls: Tool calls after the text.
        stop: The wire stop reason; by default ``stop``/``end_turn``, or
            ``tool_calls``/``tool_use`` when there are tool calls.
        input_tokens: Prompt tokens, cached ones included.
        output_tokens: Generated tokens.
        cached_tokens: Prompt tokens read from the cache.
        cache_write_tokens: Prompt tokens written to the cache (Anthropic only).
        headers: Extra response headers.
        disconnect_after: Drop the connection after this many stream events.
        truncate_after: End the stream cleanly after this many events (no finish event).
        malformed_at: Replace stream event number N by one whose data is not JSON.
        error_after: Send an in-stream error event after this many events.
        error_type: The type of that error (e.g. ``"overloaded_error"``).
        chunk_delay_s: Pause before each stream event (to observe a client going away).
        reuse_tool_index: Stream every tool call under ``index`` 0, each with its own ``id``
            (what Ollama's OpenAI-compatible endpoint sends for a parallel batch).
    """

    text: str | Sequence[str] = ""
    tool_calls: Sequence[ToolCall] = ()
    stop: str | None = None
    input_tokens: int = 12
    output_tokens: int = 5
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    headers: Mapping[str, str] = field(default_factory=dict)
    disconnect_after: int | None = None
    truncate_after: int | None = None
    malformed_at: int | None = None
    error_after: int | None = None
    error_type: str = "overloaded_error"
    chunk_delay_s: float = 0.0
    reuse_tool_index: bool = False

    @property
    def chunks(self) -> list[str]:
        return [self.text] if isinstance(self.text, str) else list(self.text)

    @property
    def full_text(self) -> str:
        return "".join(self.chunks)


@dataclass(frozen=True)
class Status:
    """An HTTP error answer with a provider-shaped body (unless ``body`` is given)."""

    status: int
    headers: Mapping[str, str] = field(default_factory=dict)
    message: str = "scripted failure"
    error_type: str | None = None
    code: str | None = None
    body: Any = None


_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


def error_body(provider: str, status: Status) -> dict[str, Any]:
    """The JSON error body each provider sends with an HTTP error."""
    if provider == "anthropic":
        err_type = status.error_type or _ANTHROPIC_TYPES.get(status.status, "api_error")
        return {"type": "error", "error": {"type": err_type, "message": status.message}}
    err_type = status.error_type or ("invalid_request_error" if status.status < 500 else "server_error")
    return {"error": {"message": status.message, "type": err_type, "param": None, "code": status.code}}


def refused(provider: str, body: Any) -> Status | None:
    """The error a provider answers a request it refuses outright with, or ``None``.

    Anthropic refuses ``tool_use`` / ``tool_result`` blocks in a request that declares no tools.
    """
    if provider != "anthropic" or not isinstance(body, dict) or body.get("tools"):
        return None
    for message in body.get("messages") or ():
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") in ("tool_use", "tool_result") for b in content
        ):
            return Status(400, message="Requests which include `tool_use` or `tool_result` blocks must define tools.")
    return None


def _openai_usage(reply: Reply) -> dict[str, Any]:
    return {
        "prompt_tokens": reply.input_tokens,
        "completion_tokens": reply.output_tokens,
        "total_tokens": reply.input_tokens + reply.output_tokens,
        "prompt_tokens_details": {"cached_tokens": reply.cached_tokens},
    }


def _anthropic_usage(reply: Reply) -> dict[str, Any]:
    # On the wire, input_tokens excludes cache reads and writes.
    plain = reply.input_tokens - reply.cached_tokens - reply.cache_write_tokens
    return {
        "input_tokens": max(plain, 0),
        "output_tokens": reply.output_tokens,
        "cache_read_input_tokens": reply.cached_tokens,
        "cache_creation_input_tokens": reply.cache_write_tokens,
    }


def _stop(provider: str, reply: Reply) -> str:
    if reply.stop is not None:
        return reply.stop
    if provider == "anthropic":
        return "tool_use" if reply.tool_calls else "end_turn"
    return "tool_calls" if reply.tool_calls else "stop"


def json_reply(provider: str, reply: Reply, request: Mapping[str, Any], seq: int) -> dict[str, Any]:
    """A complete (non-streamed) answer."""
    model = request.get("model", "loopback-model")
    if provider == "anthropic":
        content: list[dict[str, Any]] = []
        if reply.full_text:
            content.append({"type": "text", "text": reply.full_text})
        for call in reply.tool_calls:
            try:
                tool_input = json.loads(call.text or "{}")
            except ValueError:
                tool_input = {}
            content.append({"type": "tool_use", "id": call.id, "name": call.name, "input": tool_input})
        return {
            "id": f"msg_{seq:04d}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": _stop(provider, reply),
            "stop_sequence": None,
            "usage": _anthropic_usage(reply),
        }
    message: dict[str, Any] = {"role": "assistant", "content": reply.full_text or None}
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.text}}
            for c in reply.tool_calls
        ]
    return {
        "id": f"chatcmpl-{seq:04d}",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": _stop(provider, reply), "logprobs": None}],
        "usage": _openai_usage(reply),
    }


def _openai_events(reply: Reply, request: Mapping[str, Any], seq: int) -> Iterator[tuple[str | None, Any]]:
    base = {"id": f"chatcmpl-{seq:04d}", "object": "chat.completion.chunk", "created": 1_700_000_000}
    base["model"] = request.get("model", "loopback-model")

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]}

    yield None, chunk({"role": "assistant", "content": ""})
    for piece in reply.chunks:
        if piece:
            yield None, chunk({"content": piece})
    for index, call in enumerate(reply.tool_calls):
        for n, fragment in enumerate(call.fragments):
            function: dict[str, Any] = {"arguments": fragment}
            entry: dict[str, Any] = {"index": 0 if reply.reuse_tool_index else index, "function": function}
            if n == 0:
                entry.update(id=call.id, type="function")
                function["name"] = call.name
            yield None, chunk({"tool_calls": [entry]})
    yield None, chunk({}, _stop("openai", reply))
    options = request.get("stream_options") or {}
    if options.get("include_usage"):
        yield None, {**base, "choices": [], "usage": _openai_usage(reply)}
    yield None, "[DONE]"


def _anthropic_events(reply: Reply, request: Mapping[str, Any], seq: int) -> Iterator[tuple[str | None, Any]]:
    usage = _anthropic_usage(reply)
    start_usage = {**usage, "output_tokens": 1}
    message = {
        "id": f"msg_{seq:04d}",
        "type": "message",
        "role": "assistant",
        "model": request.get("model", "loopback-model"),
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": start_usage,
    }
    yield "message_start", {"type": "message_start", "message": message}
    yield "ping", {"type": "ping"}
    index = 0
    if reply.full_text:
        yield (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        )
        for piece in reply.chunks:
            if piece:
                delta = {"type": "text_delta", "text": piece}
                yield "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": 0}
        index = 1
    for call in reply.tool_calls:
        block = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
        yield "content_block_start", {"type": "content_block_start", "index": index, "content_block": block}
        for fragment in call.fragments:
            delta = {"type": "input_json_delta", "partial_json": fragment}
            yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
        index += 1
    stop = {"stop_reason": _stop("anthropic", reply), "stop_sequence": None}
    yield "message_delta", {"type": "message_delta", "delta": stop, "usage": {"output_tokens": reply.output_tokens}}
    yield "message_stop", {"type": "message_stop"}


def sse_events(provider: str, reply: Reply, request: Mapping[str, Any], seq: int) -> Iterator[str]:
    """The reply as server-sent events, faults applied (``disconnect_after`` is the server's job)."""
    source = _anthropic_events if provider == "anthropic" else _openai_events
    for index, (event, data) in enumerate(source(reply, request, seq)):
        if reply.error_after is not None and index == reply.error_after:
            error = {"type": reply.error_type, "message": "scripted stream error"}
            if provider == "anthropic":
                yield f"event: error\ndata: {json.dumps({'type': 'error', 'error': error})}\n\n"
            else:
                yield f"data: {json.dumps({'error': error})}\n\n"
            return
        text = data if isinstance(data, str) else json.dumps(data)
        if reply.malformed_at is not None and index == reply.malformed_at:
            text = '{"choices": [{"delta": {"content": "broken'
        prefix = f"event: {event}\n" if event else ""
        yield f"{prefix}data: {text}\n\n"


def system_text(body: Any) -> str:
    """The system prompt of an OpenAI or Anthropic request body."""
    if not isinstance(body, Mapping):
        return ""
    system = body.get("system")
    if isinstance(system, str):
        return system
    if isinstance(system, list):
        return "".join(b.get("text", "") for b in system if isinstance(b, Mapping))
    for message in body.get("messages") or ():
        if message.get("role") in ("system", "developer"):
            return _content_text(message.get("content"))
    return ""


def last_user_text(body: Any) -> str:
    """The text of the last user turn of an OpenAI or Anthropic request body."""
    if not isinstance(body, Mapping):
        return ""
    for message in reversed(body.get("messages") or ()):
        if message.get("role") == "user":
            text = _content_text(message.get("content"))
            if text:
                return text
    return ""


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, Mapping) and b.get("type") == "text")
    return ""
