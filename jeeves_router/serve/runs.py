"""The replies that run an agent: a chat completion (whole or streamed) and a run's event stream.

Each is a :class:`RunReply` (:mod:`._run_reply`): it runs the agent while it answers, under
a watcher of the client's connection, and gives the run's concurrency slot back when it
ends. A failed run is reported by its error type only: exception messages and tracebacks
stay out of replies and logs. Its error (a 500 before the first token, whole or streamed; an
error chunk after it) says what the run had spent as the error object's ``usage`` (a
completion's ``usage`` shape), as does the error that ends a started stream a shutdown cuts.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable
from typing import Any

from starlette.types import Send

from .._limits import DEFAULT_SEND_TIMEOUT_S
from .._routing import routing_update
from ..agent import Agent, RunStream
from ..errors import UsageError
from ..events import Event as RunEvent
from ..events import RunFailed
from ..reply import ReplyText
from ..usage import spent_usage
from ._run_reply import RunReply, body_message, headers_of, send_json, start_message
from ._unfinished import failure, refusal
from .guard import Drain
from .wire import (
    DONE,
    ApiError,
    ChatRequest,
    RunRequest,
    chunk,
    completion,
    content_chunks,
    new_completion_id,
    routing_headers,
    sse_data,
    sse_event,
    usage_chunk,
)

__all__ = ["RunReply", "chat_reply", "events_reply"]

log = logging.getLogger("jeeves_router.serve")

_SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache"), (b"x-accel-buffering", b"no")]


def _replay_mark(stream: RunStream, headers: dict[str, str]) -> dict[str, str]:
    """``headers``, with ``Idempotent-Replayed: true`` when the run replays a completed earlier one."""
    if stream.replayed:  # known from the run's first event: the runtime claimed the run before it
        headers["idempotent-replayed"] = "true"
    return headers


def _open(agent: Agent, prompt: str, req: ChatRequest | RunRequest, force_route: str | None = None) -> RunStream:
    try:
        return agent.stream(
            prompt,
            session_id=req.session_id,
            history=req.history or None,
            context=getattr(req, "context", None),
            force_route=force_route,
            idempotency_key=req.idempotency_key,
        )
    except UsageError as exc:  # an argument the agent refuses (an unknown force_route, a context off its schema)
        raise ApiError(400, str(exc), param=exc.argument) from None


def chat_reply(
    agent: Agent,
    req: ChatRequest,
    release: Callable[[], None],
    drain: Drain,
    retry_after_s: int = 1,
    *,
    send_timeout_s: float = DEFAULT_SEND_TIMEOUT_S,
) -> RunReply:
    """The reply to a chat completion request (raises :class:`ApiError` for bad arguments).

    ``retry_after_s``: the ``Retry-After`` of a 409 (the run of the request's idempotency key is in flight);
    ``send_timeout_s``: :class:`RunReply`'s.
    """
    stream = _open(agent, req.prompt, req)
    produce = _chat_stream if req.stream else _chat_whole
    keyed = req.idempotency_key is not None
    return RunReply(
        lambda send: produce(agent, req, stream, send, retry_after_s),
        release,
        drain,
        _cut_chunk,
        keyed=keyed,
        run=stream,
        send_timeout_s=send_timeout_s,
    )


async def _chat_whole(agent: Agent, req: ChatRequest, stream: RunStream, send: Send, retry_after_s: int) -> None:
    reply = ReplyText()  # the text a stream of this run says (ReplyText's rule)
    async with stream:
        try:
            async for ev in stream:
                reply.feed(ev)
        except Exception:  # a failed run raises after run.failed; it is kept in stream.error
            if stream.error is None:
                raise
    result = stream.result
    if result is None:
        err = refusal(agent, stream.error, retry_after_s)
        await send_json(send, err.status, err.body(), err.headers)
        return
    headers = routing_headers(result.route, result.confidence, result.fallback_reason)
    headers["x-jeeves-session-id"] = result.session_id
    reply.end(result)
    await send_json(send, 200, completion(req.model, result, reply.text), _replay_mark(stream, headers))


async def _chat_stream(agent: Agent, req: ChatRequest, stream: RunStream, send: Send, retry_after_s: int) -> None:
    reply = ReplyText()  # what this stream says (a whole reply of the run says the same)
    async with stream:
        routed: dict[str, Any] = {}
        first: str | None = None
        try:
            async for ev in stream:  # up to the first text: the routing decision goes in the headers
                first = reply.feed(ev)
                if first is not None:
                    break
                update = routing_update(ev) if len(ev.path) == 1 else None  # the root's routing, so far
                if update is not None:
                    routed.update(update)
        except Exception:  # a failed run raises after run.failed; it is kept in stream.error
            if stream.error is None:
                raise
        if first is None and stream.error is not None:
            err = refusal(agent, stream.error, retry_after_s)
            await send_json(send, err.status, err.body(), err.headers)
            return
        done = stream.result
        if done is not None:
            routed = {"route": done.route, "confidence": done.confidence, "fallback_reason": done.fallback_reason}
        headers = routing_headers(routed.get("route"), routed.get("confidence"), routed.get("fallback_reason"))
        headers["x-jeeves-session-id"] = stream.session_id
        await send(start_message(200, [*_SSE_HEADERS, *headers_of(_replay_mark(stream, headers))]))
        cid, created = new_completion_id(), int(time.time())
        opening = sse_data(chunk(cid, req.model, created, delta={"role": "assistant", "content": ""}))
        text = content_chunks(cid, req.model, created)
        if first is not None:  # one write for the opening and the first text
            await send(body_message(opening + text(first)))
            opening = b""
            try:
                async for ev in stream:
                    piece = reply.feed(ev)
                    if piece is not None:
                        await send(body_message(text(piece)))
            except Exception:  # a failed run: kept in stream.error, reported below
                if stream.error is None:
                    raise
        result = stream.result
        if result is None:
            error_type = type(stream.error).__name__
            log.warning("run failed mid-stream", extra={"agent": agent.name, "error_type": error_type})
            tail = opening
            spent = spent_usage(stream.error) if stream.error is not None else None
            if req.include_usage and spent is not None:  # what it had spent, as a completed run's usage chunk
                tail += sse_data(usage_chunk(cid, req.model, created, spent))
            tail += sse_data(failure(error_type, stream.error).body())
        else:
            tail = opening
            rest = reply.end(result)  # an answer not streamed (e.g. a recovery report's message)
            if rest:
                tail += text(rest)
            tail += sse_data(chunk(cid, req.model, created, finish=True, result=result))
            if req.include_usage:
                tail += sse_data(usage_chunk(cid, req.model, created, result.usage))
        await send(body_message(tail + DONE, more=False))  # one write for the end


def events_reply(
    agent: Agent,
    req: RunRequest,
    release: Callable[[], None],
    drain: Drain,
    retry_after_s: int = 1,
    *,
    send_timeout_s: float = DEFAULT_SEND_TIMEOUT_S,
) -> RunReply:
    """The reply to ``POST /v1/runs``: every event of the run as a named server-sent event (409 as above)."""
    stream = _open(agent, req.prompt, req, req.force_route)

    async def produce(send: Send) -> None:
        async with stream:
            seq = 0

            async def forward(ev: RunEvent) -> None:
                nonlocal seq
                seq += 1
                if isinstance(ev, RunFailed):
                    log.warning("run failed", extra={"agent": agent.name, "error_type": ev.error_type})
                    ev = dataclasses.replace(ev, message=f"the run failed ({ev.error_type}); see the server log")
                await send(body_message(sse_event(seq, ev)))

            try:
                # the head waits for the first event: a run that fails before it (its journal
                # cannot be written, ...) has no run.failed to send, so it gets an error reply
                first = await stream.__anext__()
            except StopAsyncIteration:
                first = None
            except Exception:
                if stream.error is None:
                    raise
                err = refusal(agent, stream.error, retry_after_s)
                await send_json(send, err.status, err.body(), err.headers)
                return
            head = _replay_mark(stream, {"x-jeeves-session-id": stream.session_id})
            await send(start_message(200, [*_SSE_HEADERS, *headers_of(head)]))
            try:
                if first is not None:
                    await forward(first)
                    async for ev in stream:
                        await forward(ev)
            except Exception:  # the run failed: its run.failed event was the last one sent
                if stream.error is None:
                    raise
            await send(body_message(b"", more=False))

    keyed = req.idempotency_key is not None
    return RunReply(produce, release, drain, _cut_event, keyed=keyed, run=stream, send_timeout_s=send_timeout_s)


def _cut_chunk(error: dict[str, Any]) -> bytes:
    """A chat stream's end when a shutdown cut it: the error chunk, then ``[DONE]``."""
    return sse_data(error) + DONE


def _cut_event(error: dict[str, Any]) -> bytes:
    """A run event stream's end when a shutdown cut it: an ``error`` event."""
    return b"event: error\ndata: " + json.dumps(error).encode() + b"\n\n"
