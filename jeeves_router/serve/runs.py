"""The replies that run an agent: a chat completion (whole or streamed) and a run's event stream.

Each is an ASGI response that runs the agent while it answers, under a watcher of the
client's connection: a client that disconnects cancels its run at the run's current await
point (the stream is closed, so the steps already journaled stay in the journal and
nothing runs on) — unless the request has an ``Idempotency-Key``: its client will ask again,
so the run goes on unseen to its end (a refund cut mid-call would leave its outcome unknown,
and every retry would fail), and the retry gets its answer. The run's slot of the
concurrency limit is released when the reply ends, however it ends. A failed run is
reported by its error type only: exception messages and tracebacks stay out of replies and logs.
Its error (a 500 before the first token, whole or streamed; an error chunk after it) says what
the run had spent as the error object's ``usage`` (a completion's ``usage`` shape), as does the
error that ends a started stream a shutdown cuts.

A client that stops reading but keeps its connection open is dropped as one that disconnected:
once the unread reply fills the connection's buffers, the run waits at its next write (uvicorn's
flow control), and a write that waited ``send_timeout_s`` seconds (the CLI's ``--send-timeout``,
as nginx's ``send_timeout``) takes the disconnect path above — the run is cancelled (a keyed run
goes on unseen), its slot released, and the reply ends unfinished, so uvicorn closes the
connection (logging ``ASGI callable returned without completing response.``).

A 5xx reply to a request without an ``Idempotency-Key`` says ``X-Should-Retry: false``: its run
started (it may have refunded before it failed or was cut), so the openai SDK must not run it
again on their own, as they do for any other 5xx; a keyed request's retry resumes its run instead.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from .._limits import DEFAULT_SEND_TIMEOUT_S
from ..agent import Agent, RunStream
from ..errors import UsageError
from ..events import Event as RunEvent
from ..events import RunFailed, routing_update
from ..reply import ReplyText
from ..usage import Usage, cut_requests, spent_usage
from ._unfinished import cut_before_start, cut_failure, cut_spend, failure, log_cut, refusal
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

Produce = Callable[[Send], Awaitable[None]]
_SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache"), (b"x-accel-buffering", b"no")]
#: Honoured by the openai Python SDK, which otherwise retries any 5xx twice (by default).
_NO_RETRY = (b"x-should-retry", b"false")


def _replay_mark(stream: RunStream, headers: dict[str, str]) -> dict[str, str]:
    """``headers``, with ``Idempotent-Replayed: true`` when the run replays a completed earlier one."""
    if stream.replayed:  # known from the run's first event: the runtime claimed the run before it
        headers["idempotent-replayed"] = "true"
    return headers


def _headers(extra: dict[str, str]) -> list[tuple[bytes, bytes]]:
    return [(k.encode(), v.encode()) for k, v in extra.items()]


class RunReply(Response):
    """An ASGI reply that runs ``produce(send)`` while watching for the client to disconnect.

    Args:
        produce: Runs the agent and sends the whole response.
        release: Called once the reply is over (gives the concurrency slot back).
        drain: Where the reply registers itself, so a shutdown can cancel it.
        cut: Frames the error that ends a response that was started when its run is
            cancelled by a shutdown (:func:`._unfinished.cut_failure`'s body, with what the run
            had spent) in the stream's format.
        keyed: The request has an idempotency key: a client that disconnects does not cancel
            the run, which goes on to its end unseen (a shutdown still cancels it).
        run: The run ``produce`` streams: a run this reply cuts (its client left, the server
            shut down) is logged with what it had spent (:func:`._unfinished.log_cut`).
        send_timeout_s: How long one write may wait for the client to read; after it the client
            is gone, as one that disconnected.
    """

    def __init__(
        self,
        produce: Produce,
        release: Callable[[], None],
        drain: Drain,
        cut: Callable[[dict[str, Any]], bytes],
        *,
        keyed: bool = False,
        run: RunStream | None = None,
        send_timeout_s: float = DEFAULT_SEND_TIMEOUT_S,
    ) -> None:
        super().__init__()
        self._produce = produce
        self._release = release
        self._drain = drain
        self._cut = cut
        self._keyed = keyed
        self._run = run
        self._send_timeout_s = send_timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Run the reply; cancel it if the client disconnects or stops reading; release the slot at the end."""
        sent = {"started": False, "done": False, "gone": False, "left": False, "over": False}
        left_because = ["client_disconnected"]
        client = anyio.CancelScope()  # the run's, for the client: cancelled when it is gone

        def gone(why: str) -> None:
            """The one path of a client that is gone (``why``: it disconnected, or stopped reading)."""
            if self._keyed:  # its retry gets the answer: let the run end
                if not sent["gone"]:
                    log.info("%s; its keyed run goes on for the retry", why.replace("_", " "))
                sent["gone"] = True
                return
            if not client.cancel_called and not sent["over"]:  # a run that has ended is not cut
                log.info("%s; cancelling its run", why.replace("_", " "))
                sent["left"], left_because[0] = True, why
            client.cancel()

        async def tracked(message: Message) -> None:
            if sent["gone"]:
                return  # a keyed run whose client left: nobody reads it
            if message["type"] == "http.response.start":
                sent["started"] = True
                if message["status"] >= 500 and not self._keyed:  # the run started: a blind retry runs it again
                    message = {**message, "headers": [*message["headers"], _NO_RETRY]}
            elif not message.get("more_body", False):
                sent["done"] = True
            with anyio.move_on_after(self._send_timeout_s) as write:
                await send(message)
            if write.cancelled_caught:  # the reader took nothing for that long: it is gone
                sent["done"] = False
                gone("client_stalled")

        shutdown = anyio.CancelScope()
        self._drain.add(shutdown)
        cut_off: list[Usage] = []  # the model requests a cancellation cut off (sent: they count)
        try:
            with shutdown, cut_requests() as cut_off:
                with client:
                    async with anyio.create_task_group() as tg:

                        async def watch() -> None:
                            while (await receive())["type"] != "http.disconnect":
                                pass
                            gone("client_disconnected")

                        tg.start_soon(watch)
                        await self._guarded(tracked, sent)
                        sent["over"] = True
                        tg.cancel_scope.cancel()
            spent = cut_spend(self._run, cut_off) if self._run is not None else None
            if sent.get("left") and self._run is not None and spent is not None:
                log_cut(self._run, left_because[0], spent)
            if shutdown.cancelled_caught:
                log.info("run cancelled by the server's shutdown")
                if self._run is not None and spent is not None:
                    log_cut(self._run, "server_shutdown", spent)
                if not sent["started"]:
                    err = cut_before_start(spent)
                    await _send_json(tracked, err.status, err.body())
                elif not sent["done"]:
                    await tracked(_body(self._cut(cut_failure(spent).body()), more=False))
        finally:
            self._drain.discard(shutdown)
            self._release()

    async def _guarded(self, send: Send, sent: dict[str, bool]) -> None:
        try:
            await self._produce(send)
        except Exception as exc:  # a server bug: report its type only, never its text or traceback
            log.error("reply failed", extra={"error_type": type(exc).__name__})
            if not sent["started"]:
                msg = f"internal error ({type(exc).__name__})"
                err = ApiError(500, msg, code="internal_error", type="server_error")
                await _send_json(send, err.status, err.body())


def _start(status: int, headers: list[tuple[bytes, bytes]]) -> dict[str, object]:
    return {"type": "http.response.start", "status": status, "headers": headers}


def _body(data: bytes, more: bool = True) -> dict[str, object]:
    return {"type": "http.response.body", "body": data, "more_body": more}


async def _send_json(send: Send, status: int, payload: object, headers: dict[str, str] | None = None) -> None:
    body = json.dumps(payload, separators=(",", ":")).encode()
    await send(_start(status, [(b"content-type", b"application/json"), *_headers(headers or {})]))
    await send(_body(body, more=False))


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
        await _send_json(send, err.status, err.body(), err.headers)
        return
    headers = routing_headers(result.route, result.confidence, result.fallback_reason)
    headers["x-jeeves-session-id"] = result.session_id
    reply.end(result)
    await _send_json(send, 200, completion(req.model, result, reply.text), _replay_mark(stream, headers))


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
            await _send_json(send, err.status, err.body(), err.headers)
            return
        done = stream.result
        if done is not None:
            routed = {"route": done.route, "confidence": done.confidence, "fallback_reason": done.fallback_reason}
        headers = routing_headers(routed.get("route"), routed.get("confidence"), routed.get("fallback_reason"))
        headers["x-jeeves-session-id"] = stream.session_id
        await send(_start(200, [*_SSE_HEADERS, *_headers(_replay_mark(stream, headers))]))
        cid, created = new_completion_id(), int(time.time())
        opening = sse_data(chunk(cid, req.model, created, delta={"role": "assistant", "content": ""}))
        text = content_chunks(cid, req.model, created)
        if first is not None:  # one write for the opening and the first text
            await send(_body(opening + text(first)))
            opening = b""
            try:
                async for ev in stream:
                    piece = reply.feed(ev)
                    if piece is not None:
                        await send(_body(text(piece)))
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
        await send(_body(tail + DONE, more=False))  # one write for the end


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
                await send(_body(sse_event(seq, ev)))

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
                await _send_json(send, err.status, err.body(), err.headers)
                return
            head = _replay_mark(stream, {"x-jeeves-session-id": stream.session_id})
            await send(_start(200, [*_SSE_HEADERS, *_headers(head)]))
            try:
                if first is not None:
                    await forward(first)
                    async for ev in stream:
                        await forward(ev)
            except Exception:  # the run failed: its run.failed event was the last one sent
                if stream.error is None:
                    raise
            await send(_body(b"", more=False))

    keyed = req.idempotency_key is not None
    return RunReply(produce, release, drain, _cut_event, keyed=keyed, run=stream, send_timeout_s=send_timeout_s)


def _cut_chunk(error: dict[str, Any]) -> bytes:
    """A chat stream's end when a shutdown cut it: the error chunk, then ``[DONE]``."""
    return sse_data(error) + DONE


def _cut_event(error: dict[str, Any]) -> bytes:
    """A run event stream's end when a shutdown cut it: an ``error`` event."""
    return b"event: error\ndata: " + json.dumps(error).encode() + b"\n\n"
