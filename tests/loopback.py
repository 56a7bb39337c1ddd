"""A scriptable HTTP server on 127.0.0.1 that speaks the OpenAI and Anthropic wire formats.

The real ``openai`` / ``anthropic`` SDK clients point at it through ``base_url``. Each
incoming request takes the next scripted reply (or asks ``responder``), is recorded, and
is answered as JSON or as a server-sent event stream, depending on the request's
``"stream"`` flag and path (``/v1/chat/completions`` or ``/v1/messages``)::

    async def test_something(loopback):               # the fixture below (an async one)
        loopback.script(Status(429, headers={"retry-after": "2"}), Reply(text=["Hel", "lo"]))
        client = loopback.openai_client()
        ...
        assert len(loopback.requests) == 2

Faults: :class:`Status` (any HTTP error, provider-shaped body), :class:`Reset` (connection
reset before any header), :class:`Hang` (never answers; the client's read timeout fires),
and on :class:`Reply`: ``disconnect_after`` (drop the connection after N events),
``malformed_at`` (an event whose data is not JSON), ``error_after`` (an in-stream error
event), and tool-call arguments that are not valid JSON.

The server runs its own asyncio loop in a daemon thread, so it serves tests on any event
loop (or none) and outlives nothing: :meth:`LoopbackServer.stop` ends it. The SDK clients it
hands out are its to close (:meth:`LoopbackServer.aclose_clients`; the fixture, an async one,
closes them after the test, on the test's loop).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
import struct
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Union

import pytest

from tests import loopback_wire as wire

__all__ = [
    "FAKE_ANTHROPIC_KEY",
    "FAKE_OPENAI_KEY",
    "Hang",
    "LoopbackServer",
    "RecordedRequest",
    "Reply",
    "Reset",
    "Status",
    "ToolCall",
    "loopback",
    "text_chunks",
]

FAKE_OPENAI_KEY = "sk-loopback-openai-5ecret-0123456789abcdef"
FAKE_ANTHROPIC_KEY = "sk-ant-loopback-5ecret-0123456789abcdef"

ToolCall = wire.ToolCall
Reply = wire.Reply
Status = wire.Status


@dataclass(frozen=True)
class Reset:
    """Reset the connection (TCP RST) after reading the request, before any header."""


@dataclass(frozen=True)
class Hang:
    """Read the request and never answer, until the client gives up or the server stops."""


Action = Union[Reply, Status, Reset, Hang]
Script = Union[Action, Callable[["RecordedRequest"], Action]]


def hang_once(client: Any, guard: float = 120.0) -> Callable[[RecordedRequest], Action]:
    """A :class:`Hang` for the request it takes; the SDK ``client``'s later requests get ``guard`` as timeout.

    A test sets a short timeout for the hanging request to time out; a reply scripted after
    it must not be bound by it too (a loaded machine answers late): its timeout becomes a
    hang guard as the server takes the hanging request, before that request times out.
    """

    def hang(request: RecordedRequest) -> Action:
        client.timeout = guard  # read by the SDK as it builds each request
        return Hang()

    return hang


@dataclass
class RecordedRequest:
    """One request as the server received it.

    Attributes:
        method: HTTP method.
        path: Request path, e.g. ``"/v1/chat/completions"``.
        headers: Header names lower-cased.
        body: The decoded JSON body (``None`` when absent or not JSON).
        aborted: Set when the client went away before the reply was fully written.
        done: Set when the server has finished with this request, either way.
    """

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    aborted: threading.Event = field(default_factory=threading.Event)
    done: threading.Event = field(default_factory=threading.Event)

    @property
    def provider(self) -> str | None:
        """``"openai"``, ``"anthropic"`` or ``None`` for another path."""
        if self.path.endswith("/chat/completions"):
            return "openai"
        if self.path.endswith("/messages"):
            return "anthropic"
        return None

    @property
    def stream(self) -> bool:
        """Whether the client asked for an event stream."""
        return isinstance(self.body, dict) and bool(self.body.get("stream"))

    @property
    def system_text(self) -> str:
        """The system prompt, whichever wire format carried it."""
        return wire.system_text(self.body)

    @property
    def last_user_text(self) -> str:
        """The text of the last user turn."""
        return wire.last_user_text(self.body)


class LoopbackServer:
    """The server; use it as a context manager or through the :func:`loopback` fixture."""

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self.responder: Callable[[RecordedRequest], Action] | None = None
        self._script: deque[Script] = deque()
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="loopback-server", daemon=True)
        self._server: asyncio.AbstractServer | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._ids = itertools.count(1)
        self._clients: list[Any] = []  # the SDK clients handed out, closed by aclose_clients()
        self.port = 0

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> LoopbackServer:
        """Bind a free port on 127.0.0.1 and serve in a background thread."""
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(self._start(), self._loop)
        future.result(timeout=10)
        return self

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._on_connect, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    def stop(self) -> None:
        """Stop serving, end hanging requests and join the thread."""
        if not self._thread.is_alive():
            return
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    async def _stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def __enter__(self) -> LoopbackServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- scripting ------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def openai_base_url(self) -> str:
        """The ``base_url`` for ``openai.AsyncOpenAI``."""
        return f"{self.url}/v1"

    @property
    def anthropic_base_url(self) -> str:
        """The ``base_url`` for ``anthropic.AsyncAnthropic``."""
        return self.url

    def script(self, *actions: Script) -> None:
        """Queue replies; each request takes the next one (a callable gets the request)."""
        with self._lock:
            self._script.extend(actions)

    @property
    def pending(self) -> int:
        """How many scripted replies are still unused."""
        with self._lock:
            return len(self._script)

    def openai_client(self, *, timeout: float = 10.0, api_key: str = FAKE_OPENAI_KEY, **kwargs: Any) -> Any:
        """A real ``openai.AsyncOpenAI`` pointed here, with the SDK's retries off."""
        import openai

        client = openai.AsyncOpenAI(
            api_key=api_key, base_url=self.openai_base_url, timeout=timeout, max_retries=0, **kwargs
        )
        self._clients.append(client)
        return client

    def anthropic_client(self, *, timeout: float = 10.0, api_key: str = FAKE_ANTHROPIC_KEY, **kwargs: Any) -> Any:
        """A real ``anthropic.AsyncAnthropic`` pointed here, with the SDK's retries off."""
        import anthropic

        client = anthropic.AsyncAnthropic(
            api_key=api_key, base_url=self.anthropic_base_url, timeout=timeout, max_retries=0, **kwargs
        )
        self._clients.append(client)
        return client

    async def aclose_clients(self) -> None:
        """Close every client :meth:`openai_client` / :meth:`anthropic_client` handed out.

        Call it on the test's event loop, the one their connections belong to (the
        :func:`loopback` fixture does): a client left open is finalised by the garbage
        collector later, and the SDK then schedules its ``aclose()`` on whatever loop runs.
        """
        clients, self._clients = self._clients, []
        for client in clients:
            await client.close()

    def _next_action(self, request: RecordedRequest) -> Action:
        refused = wire.refused(request.provider or "openai", request.body)
        if refused is not None:  # what the provider refuses before it answers: no scripted reply is used
            return refused
        with self._lock:
            item: Script | None = self._script.popleft() if self._script else None
        if item is None:
            if self.responder is None:
                return Status(400, message=f"loopback: no scripted reply left for request {len(self.requests)}")
            item = self.responder
        return item(request) if callable(item) else item

    # -- HTTP -----------------------------------------------------------------------------

    def _on_connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.ensure_future(self._serve(reader, writer))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request: RecordedRequest | None = None
        try:
            request = await _read_request(reader)
            if request is None:
                return
            self.requests.append(request)
            action = self._next_action(request)
            await self._answer(action, request, reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            if request is not None:
                request.aborted.set()
        finally:
            if request is not None:
                request.done.set()
            if not writer.transport.is_closing():
                writer.transport.abort() if request is not None and request.aborted.is_set() else writer.close()

    async def _answer(
        self, action: Action, request: RecordedRequest, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        if isinstance(action, Reset):
            sock = writer.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
            return
        if isinstance(action, Hang):
            await reader.read()  # returns at EOF, when the client gives up
            request.aborted.set()
            return
        provider = request.provider or "openai"
        if isinstance(action, Status):
            payload = json.dumps(action.body if action.body is not None else wire.error_body(provider, action))
            await _write_head(writer, action.status, "application/json", action.headers, len(payload.encode()))
            writer.write(payload.encode())
            await writer.drain()
            return
        body = request.body if isinstance(request.body, dict) else {}
        seq = next(self._ids)
        if not request.stream:
            payload = json.dumps(wire.json_reply(provider, action, body, seq))
            await _write_head(writer, 200, "application/json", action.headers, len(payload.encode()))
            writer.write(payload.encode())
            await writer.drain()
            return
        await _write_head(writer, 200, "text/event-stream", action.headers, None)
        for index, event in enumerate(wire.sse_events(provider, action, body, seq)):
            if action.disconnect_after is not None and index >= action.disconnect_after:
                writer.transport.abort()  # no chunk terminator: the body is cut short
                request.aborted.set()
                return
            if action.truncate_after is not None and index >= action.truncate_after:
                break
            if action.chunk_delay_s:
                await asyncio.sleep(action.chunk_delay_s)
                if reader.at_eof():
                    request.aborted.set()
                    return
            data = event.encode()
            writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            await writer.drain()
        writer.write(b"0\r\n\r\n")
        await writer.drain()


async def _read_request(reader: asyncio.StreamReader) -> RecordedRequest | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    lines = head.decode("latin-1").split("\r\n")
    method, path, _ = lines[0].split(" ", 2)
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    raw = await reader.readexactly(int(headers.get("content-length", "0")))
    try:
        body = json.loads(raw) if raw else None
    except ValueError:
        body = None
    return RecordedRequest(method, path, headers, body)


async def _write_head(
    writer: asyncio.StreamWriter, status: int, content_type: str, extra: Mapping[str, str], length: int | None
) -> None:
    lines = [f"HTTP/1.1 {status} {wire.REASONS.get(status, 'Status')}", f"content-type: {content_type}"]
    lines.append("transfer-encoding: chunked" if length is None else f"content-length: {length}")
    lines.append("connection: close")
    lines.extend(f"{k}: {v}" for k, v in extra.items())
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
    await writer.drain()


@pytest.fixture
async def loopback() -> AsyncIterator[LoopbackServer]:
    """A started :class:`LoopbackServer`, its clients closed and the server stopped after the (async) test."""
    with LoopbackServer() as server:
        try:
            yield server
        finally:
            await server.aclose_clients()


def text_chunks(text: str, size: int) -> Sequence[str]:
    """``text`` cut into pieces of ``size`` characters (for streamed replies)."""
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]
