"""What the client knows of its link to a server: whether a call was sent, whether the link ended.

A tool call may be sent again only if it provably never reached the server (a tool may have
side effects). The ``mcp`` SDK reports a call on a dead connection and a call whose connection
died while it ran with the same error, so the client watches the transport's write stream
itself: :class:`Outbox` records whether the current call handed its request to the transport
(:func:`sending`), and calls ``on_closed`` when the SDK closes the stream, which it does as
soon as the server's side of the connection ends (a stdio server that exited, an HTTP session
whose transport failed). An HTTP request refused at connect was not delivered either
(:func:`refused`, from the HTTP transport's own task, which runs in the call's context).

Also here: the live :class:`Connection` a server's calls share, and the ``_meta`` each call
carries (its idempotency key).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from ..runtime import current_idempotency_key

if TYPE_CHECKING:
    from mcp import Client

    from ..tools import Tool, ToolsetHost
    from ._tool import MCPTool

__all__ = [
    "IDEMPOTENCY_META_KEY",
    "Connection",
    "Here",
    "Sending",
    "Outbox",
    "call_meta",
    "refused",
    "sending",
    "watched",
]


@dataclass(eq=False)
class Connection:
    """One live connection, owned by the host task that opened it (and reopened by a call)."""

    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    ready: anyio.Event = field(default_factory=anyio.Event)
    stop: anyio.Event = field(default_factory=anyio.Event)
    done: anyio.Event = field(default_factory=anyio.Event)  # the client has shut down
    client: Client | None = None
    tools: tuple[MCPTool, ...] = ()
    error: BaseException | None = None
    closed: bool = False
    lost: str | None = None  # why calls can no longer reach the server
    spawn: anyio.abc.TaskGroup | ToolsetHost | None = None  # where the client's task runs
    gate: anyio.Lock = field(default_factory=anyio.Lock)  # one reconnection at a time
    generation: int = 0  # how often it was reconnected
    renewing: bool = False

    def renew(self) -> None:
        """Forget the ended session (its host task has finished) before connecting again."""
        self.scope, self.ready, self.stop, self.done = anyio.CancelScope(), anyio.Event(), anyio.Event(), anyio.Event()
        self.client, self.error, self.closed, self.lost = None, None, False, None
        self.generation += 1


class Here:
    """What one event loop has of a server: its connection, the runs using it, its ``async with`` blocks.

    A connection's streams and events belong to the loop that opened it, so a server used by
    two threads, each running its own loop, opens one connection in each.
    """

    __slots__ = ("cond", "conn", "entered", "users")

    def __init__(self) -> None:
        self.conn: Connection | None = None
        self.users = 0
        self.cond = anyio.Condition()  # the users wait on it for each other to leave
        self.entered: list[AbstractAsyncContextManager[Sequence[Tool]]] = []


@dataclass
class Sending:
    """One tool call's attempt to reach the server.

    Attributes:
        sent: True once its request was handed to the transport (it may then have run).
    """

    sent: bool = False


_SENDING: ContextVar[Sending | None] = ContextVar("jeeves_router_mcp_sending", default=None)


@contextmanager
def sending() -> Iterator[Sending]:
    """Record, for the block's task, whether its request reached the transport."""
    attempt = Sending()
    token = _SENDING.set(attempt)
    try:
        yield attempt
    finally:
        _SENDING.reset(token)


def refused() -> None:
    """Say that the transport could not deliver the current call's request at all.

    An HTTP connection refused before any byte was sent: the call did not reach the server.
    """
    attempt = _SENDING.get()
    if attempt is not None:
        attempt.sent = False


class Outbox:
    """The SDK's ``WriteStream`` protocol around a transport's write stream, watched.

    Args:
        stream: The transport's write stream.
        on_closed: Called (once) when the SDK closes the stream: the connection has ended.
    """

    def __init__(self, stream: Any, on_closed: Callable[[], None]) -> None:
        self._stream = stream
        self._on_closed: Callable[[], None] | None = on_closed

    def _closed(self) -> None:
        on_closed, self._on_closed = self._on_closed, None
        if on_closed is not None:
            on_closed()

    async def send(self, item: Any, /) -> None:
        """Send ``item``; the current call counts as sent unless the stream refused it."""
        attempt = _SENDING.get()
        if attempt is not None:
            attempt.sent = True  # a send interrupted by cancellation may still have delivered it
        try:
            await self._stream.send(item)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            if attempt is not None:
                attempt.sent = False  # refused: nothing was delivered
            raise

    async def aclose(self) -> None:
        """Close the stream."""
        self._closed()
        await self._stream.aclose()

    async def __aenter__(self) -> Outbox:
        await self._stream.__aenter__()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        self._closed()
        return await self._stream.__aexit__(exc_type, exc, tb)  # type: ignore[no-any-return]


@asynccontextmanager
async def watched(transport: AbstractAsyncContextManager[Any], on_closed: Callable[[], None]) -> AsyncIterator[Any]:
    """``transport`` (an ``mcp`` client transport) with its write stream in an :class:`Outbox`."""
    async with transport as (read, write):
        yield read, Outbox(write, on_closed)


#: The ``_meta`` key that carries :func:`~jeeves_router.runtime.current_idempotency_key` to the server.
IDEMPOTENCY_META_KEY = "jeeves-router/idempotency-key"


def call_meta() -> Any:
    """A tool call's ``_meta``: the idempotency key of the call, when a durable runtime set one.

    The key is the same on every attempt of one call (a resume, a retry), so a server that
    keeps the keys it has seen can make a repeated call harmless.
    """
    key = current_idempotency_key()
    return {IDEMPOTENCY_META_KEY: key} if key is not None else None
