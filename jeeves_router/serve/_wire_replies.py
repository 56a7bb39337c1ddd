"""The HTTP wire format's replies: OpenAI-shaped completions and chunks, the routing extension, SSE framing.

Pure functions over JSON-ready data; no I/O. :mod:`jeeves_router.serve.wire` exports them
with the request validation.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from ..events import Event as RunEvent
from ..events import event_adapter
from ..results import RunResult
from ..usage import Usage

__all__ = [
    "DONE",
    "chunk",
    "completion",
    "content_chunks",
    "new_completion_id",
    "routing_headers",
    "routing_of",
    "sse_data",
    "sse_event",
    "usage_chunk",
    "usage_object",
]

DONE = b"data: [DONE]\n\n"


# -- replies --------------------------------------------------------------------------------


def routing_of(result: RunResult) -> dict[str, Any]:
    """The ``jeeves`` extension object: the routing decision and the run's outcome."""
    return {
        "route": result.route,
        "confidence": result.confidence,
        "fallback_reason": result.fallback_reason,
        "used_fallback": result.used_fallback,
        "status": result.status,
        "session_id": result.session_id,
    }


def routing_headers(route: str | None, confidence: float | None, fallback_reason: str | None) -> dict[str, str]:
    """The routing decision as ``X-Jeeves-*`` response headers (absent parts left out)."""
    out = {}
    if route is not None:
        out["x-jeeves-route"] = route
    if confidence is not None:
        out["x-jeeves-confidence"] = f"{confidence:.4f}"
    if fallback_reason is not None:
        out["x-jeeves-fallback-reason"] = fallback_reason
    return out


def usage_object(u: Usage) -> dict[str, int]:
    """``usage`` as OpenAI's wire says it: prompt, completion and total tokens."""
    return {"prompt_tokens": u.input_tokens, "completion_tokens": u.output_tokens, "total_tokens": u.total_tokens}


def new_completion_id() -> str:
    """An id for one chat completion."""
    return f"chatcmpl-{uuid.uuid4().hex}"


def completion(model: str, result: RunResult, content: str | None) -> dict[str, Any]:
    """A ``chat.completion`` object for a finished run whose reply is ``content`` (:attr:`ReplyText.text`)."""
    return {
        "id": new_completion_id(),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": usage_object(result.usage),
        "jeeves": routing_of(result),
    }


def chunk(
    cid: str,
    model: str,
    created: int,
    *,
    delta: Mapping[str, Any] | None = None,
    finish: bool = False,
    result: RunResult | None = None,
) -> dict[str, Any]:
    """One ``chat.completion.chunk``; the last one carries ``finish_reason`` and ``jeeves``."""
    body: dict[str, Any] = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model}
    body["choices"] = [
        {"index": 0, "delta": dict(delta or {}), "finish_reason": "stop" if finish else None, "logprobs": None}
    ]
    if result is not None:
        body["jeeves"] = routing_of(result)
    return body


def usage_chunk(cid: str, model: str, created: int, usage: Usage) -> dict[str, Any]:
    """The chunk ``stream_options.include_usage`` asks for: no choices, the run's ``usage``.

    A completed run's says what it spent; a failed run's, what it had spent when it failed
    (sent before the error chunk).
    """
    return {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [],
        "usage": usage_object(usage),
    }


def content_chunks(cid: str, model: str, created: int) -> Callable[[str], bytes]:
    """A fast encoder of text-delta chunks: ``sse_data(chunk(..., delta={"content": text}))``.

    Only the text changes from one chunk to the next, so the rest is serialised once.
    """
    marker = "\x00content\x00"
    head, tail = sse_data(chunk(cid, model, created, delta={"content": marker})).split(json.dumps(marker).encode())

    def encode(text: str) -> bytes:
        return head + json.dumps(text).encode() + tail

    return encode


def sse_data(payload: Mapping[str, Any]) -> bytes:
    """One ``data:`` server-sent event."""
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


def sse_event(seq: int, ev: RunEvent) -> bytes:
    """A run event as a named server-sent event (``event: <kind>``, ``id: <seq>``)."""
    data = event_adapter().dump_json(ev)
    return b"event: " + ev.kind.encode() + b"\nid: " + str(seq).encode() + b"\ndata: " + data + b"\n\n"
