"""The ASGI reply that runs an agent while it answers, watching the client's connection.

A client that disconnects cancels its run at the run's current await point (the stream is
closed, so the steps already journaled stay in the journal and nothing runs on) — unless the
request has an ``Idempotency-Key``: its client will ask again, so the run goes on unseen to
its end (a refund cut mid-call would leave its outcome unknown, and every retry would fail),
and the retry gets its answer. The run's slot of the concurrency limit is released when the
reply ends, however it ends. A server bug in a reply is reported by its error type only.

A client that stops reading but keeps its connection open is dropped as one that disconnected:
once the unread reply fills the connection's buffers, the run waits at its next write (uvicorn's
flow control), and a write that waited ``send_timeout_s`` seconds (the CLI's ``--send-timeout``,
as nginx's ``send_timeout``) takes the disconnect path above — the run is cancelled (a keyed run
goes on unseen), its slot released, and the reply ends unfinished, so uvicorn closes the
connection (logging ``ASGI callable returned without completing response.``).

A 5xx reply to a request without an ``Idempotency-Key`` says ``X-Should-Retry: false``: its run
started (it may have refunded before it failed or was cut), so the openai SDK must not run it
again on their own, as they do for any other 5xx; a keyed request's retry resumes its run instead.

What each reply says is :mod:`.runs`'s (which exports :class:`RunReply`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from starlette.responses import Response
from starlette.types import Message, Receive, Scope, Send

from .._limits import DEFAULT_SEND_TIMEOUT_S
from ..agent import RunStream
from ..usage import Usage, cut_requests
from ._unfinished import cut_before_start, cut_failure, cut_spend, log_cut
from .guard import Drain
from .wire import ApiError

__all__ = ["Produce", "RunReply", "body_message", "headers_of", "send_json", "start_message"]

log = logging.getLogger("jeeves_router.serve")

#: Runs the agent and sends the whole response.
Produce = Callable[[Send], Awaitable[None]]
#: Honoured by the openai Python SDK, which otherwise retries any 5xx twice (by default).
_NO_RETRY = (b"x-should-retry", b"false")


def headers_of(extra: dict[str, str]) -> list[tuple[bytes, bytes]]:
    """``extra`` as ASGI header pairs."""
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
                    await send_json(tracked, err.status, err.body())
                elif not sent["done"]:
                    await tracked(body_message(self._cut(cut_failure(spent).body()), more=False))
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
                await send_json(send, err.status, err.body())


def start_message(status: int, headers: list[tuple[bytes, bytes]]) -> dict[str, object]:
    """The ASGI message that starts a response."""
    return {"type": "http.response.start", "status": status, "headers": headers}


def body_message(data: bytes, more: bool = True) -> dict[str, object]:
    """The ASGI message of one part of a response's body (``more=False``: the last)."""
    return {"type": "http.response.body", "body": data, "more_body": more}


async def send_json(send: Send, status: int, payload: object, headers: dict[str, str] | None = None) -> None:
    """Send a whole JSON response."""
    body = json.dumps(payload, separators=(",", ":")).encode()
    await send(start_message(status, [(b"content-type", b"application/json"), *headers_of(headers or {})]))
    await send(body_message(body, more=False))
