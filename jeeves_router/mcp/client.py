"""Tools from MCP servers: an agent lists a server's tools and calls them like its own.

:class:`MCPServerStdio` starts a server as a subprocess and talks to it over its
stdin/stdout; :class:`MCPServerHTTP` connects to a streamable-HTTP endpoint. Pass either in
``Agent(tools=[...])``: the agent opens it around each run, lists its tools, and closes it
when the run ends. ``async with server:`` keeps one connection (one process) open across many
runs instead; runs inside it, concurrent ones too, share it. A connection belongs to the event
loop that opened it: used by threads each running their own loop, a server has one in each.

The ``mcp`` SDK's client runs in a task of its own: in the task group of the stream's
:class:`~jeeves_router.tools.ToolsetHost` under ``async with agent.stream(...)``, else in
a :class:`~jeeves_router.tools.TaskHost`'s, whose task group runs in a task of its own. No
task group or cancel scope of the connection stays entered in the task reading the stream:
the reader may wrap part of the iteration in a cancel scope of its own, and another task
may read the rest of the stream.

Every call goes through the run's runtime like a function tool's call, so ``tool.called`` /
``tool.result`` events, usage and the journal are the same (a journaled call is not repeated
on resume). Under a durable runtime (the journal, DBOS) each call also carries its idempotency
key, the same on every attempt of the call, in the request's ``_meta`` under
``"jeeves-router/idempotency-key"`` (:data:`IDEMPOTENCY_META_KEY`): a server that remembers
the keys it has served can make a repeated call (a resume with ``"retry"``) harmless.

A tool error and malformed data come back to the model as an error result naming the server
(the server answered: the outcome is known). A call left without an answer may have run if the
server had it: it raises a ``critical`` :class:`~jeeves_router.errors.ToolOutcomeUnknown`, is
never repeated nor shown to the model, and a journal's resume applies ``on_unknown_tool_outcome``.
A call that provably never reached the server is sent once the connection is opened again (see
:mod:`._link`), else raises a ``retriable`` ``ToolError`` (:meth:`MCPServer.call`). A server
that cannot be started or does not answer its handshake within ``connect_timeout`` fails the
run with a ``ToolError`` before the first model call.

Needs the ``mcp`` extra (``pip install 'jeeves-router[mcp]'``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.abc

from .._log import get_logger
from .._loops import PerLoop
from ..errors import ToolError, UsageError
from ..tools import TaskHost, Tool, ToolOutcome, ToolsetHost, current_toolset_host
from ._content import content_text, describe, failure, unknown, unreached
from ._link import IDEMPOTENCY_META_KEY, Connection, Here, call_meta, sending, watched
from ._tool import BAD_NAME, MCPTool, listed_tools

if TYPE_CHECKING:
    from mcp import Client

#: Wraps an ``mcp`` client transport so the connection is watched (:func:`._link.watched`).
Watch = Callable[[AbstractAsyncContextManager[Any]], AbstractAsyncContextManager[Any]]

__all__ = ["MCPServer", "MCPTool", "IDEMPOTENCY_META_KEY"]

log = get_logger(__name__)

_SHUTDOWN_WAIT = 15.0  # seconds; the SDK gives a stdio server 2 s to exit, then 2 s after SIGTERM


def _require_mcp() -> None:
    try:
        import mcp  # noqa: F401
    except ImportError as exc:
        raise UsageError("MCP servers need the 'mcp' package: pip install 'jeeves-router[mcp]'") from exc


class MCPServer:
    """Tools from one MCP server (base of :class:`MCPServerStdio` and :class:`MCPServerHTTP`).

    A toolset: pass it in ``Agent(tools=[...])``. Use ``async with server:`` to keep it
    open across runs; otherwise each run opens and closes it.

    Args:
        name: A name for logs and error messages.
        timeout: Seconds a tool call may take; a call the server had and did not answer in
            time raises :class:`~jeeves_router.errors.ToolOutcomeUnknown` (it may have run).
        connect_timeout: Seconds to start the server and list its tools.
        tool_prefix: Put before every tool name (to tell two servers' tools apart).
        allowed_tools: Only these tools (server names) are offered to the model.
        repeatable: Tools (server names) that are harmless to call twice, e.g. a page fetch:
            one left without an answer comes back to the model as an error result it may
            retry, instead of stopping the run. ``"hinted"``: the tools the server marks
            ``readOnlyHint`` or ``idempotentHint`` (hints, so only for servers you trust).
    """

    def __init__(
        self,
        *,
        name: str,
        timeout: float = 30.0,
        connect_timeout: float = 30.0,
        tool_prefix: str = "",
        allowed_tools: Collection[str] | None = None,
        repeatable: Collection[str] | Literal["hinted"] = (),
    ) -> None:
        if isinstance(repeatable, str) and repeatable != "hinted":
            raise UsageError(f"MCP server {name!r}: repeatable must be tool names or 'hinted', got {repeatable!r}")
        for what, value in (("timeout", timeout), ("connect_timeout", connect_timeout)):
            if not isinstance(value, (int, float)) or not value > 0:
                raise UsageError(f"MCP server {name!r}: {what} must be a positive number of seconds, got {value!r}")
        if BAD_NAME.search(tool_prefix):
            raise UsageError(f"MCP server {name!r}: tool_prefix {tool_prefix!r} may only use letters, digits, '_', '-'")
        self.name = name
        self.timeout = float(timeout)
        self.connect_timeout = float(connect_timeout)
        self.tool_prefix = tool_prefix
        self.allowed_tools = frozenset(allowed_tools) if allowed_tools is not None else None
        self.repeatable: frozenset[str] | Literal["hinted"] = (
            "hinted" if isinstance(repeatable, str) else frozenset(repeatable)
        )
        self._loops: PerLoop[Here] = PerLoop(Here)  # each event loop (thread) has a connection of its own

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    @property
    def _here(self) -> Here:
        """What the running event loop has of this server (its connection, its users)."""
        return self._loops.get()

    def _client(self, stack: AsyncExitStack, watch: Watch) -> Client:
        """A not yet entered ``mcp.Client`` for this server (resources go on ``stack``).

        Its transport must be wrapped in ``watch`` (see :mod:`._link`).
        """
        raise NotImplementedError

    @property
    def tools(self) -> tuple[MCPTool, ...]:
        """The tools listed when the server was opened on the running event loop (empty while it is closed)."""
        return conn.tools if (conn := self._here.conn) is not None else ()

    @property
    def is_open(self) -> bool:
        """True while the running event loop's connection is open (and not known to be lost)."""
        conn = self._here.conn
        return conn is not None and conn.client is not None and not conn.closed and conn.lost is None

    # -- lifetime ---------------------------------------------------------------------------

    async def __aenter__(self) -> MCPServer:
        cm = self.open()
        await cm.__aenter__()
        self._here.entered.append(cm)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._here.entered.pop().__aexit__(exc_type, exc, tb)

    @asynccontextmanager
    async def open(self) -> AsyncIterator[Sequence[Tool]]:
        """Connect, or join the connection already open, for as long as the block lasts.

        The first user owns the connection (its task hosts the ``mcp`` client): when it
        leaves, it waits for the others to leave, then closes it (for a subprocess: stdin
        is closed, then the process group is terminated, and killed if it does not exit).
        Joining an open connection enters no task group or cancel scope.

        Raises:
            ToolError: the server could not be started or did not answer its handshake
                within ``connect_timeout``.
        """
        _require_mcp()
        here = self._here
        cond = here.cond
        async with cond:
            conn = here.conn
            owner = conn is None
            if conn is None:
                conn = here.conn = Connection()
            here.users += 1
        try:
            host = current_toolset_host()
            if owner and host is not None:  # the host's task group runs the client: no scope of ours stays open
                async with self._own_hosted(host, conn) as tools:
                    yield tools
            elif owner:
                async with self._own(conn) as tools:
                    yield tools
            else:
                await conn.ready.wait()  # the owner sets it within its connect_timeout
                if conn.client is None and not conn.generation:  # a lost connection is reopened by a call
                    raise ToolError(
                        f"MCP server {self.name!r} could not be started (see the first run that opened it)",
                        metadata={"mcp_server": self.name},
                    )
                yield conn.tools
        finally:
            with anyio.CancelScope(shield=True):
                async with cond:
                    here.users -= 1
                    cond.notify_all()

    @asynccontextmanager
    async def _own(self, conn: Connection) -> AsyncIterator[Sequence[Tool]]:
        """Host the connection in a task of its own (a :class:`TaskHost`), for as long as anyone uses it.

        No task group of ours stays entered in the caller's task: a run read on by another
        task than the one that opened its server closes it there.
        """
        async with TaskHost() as host, self._own_hosted(host, conn) as tools:
            yield tools

    @asynccontextmanager
    async def _own_hosted(self, host: ToolsetHost, conn: Connection) -> AsyncIterator[Sequence[Tool]]:
        """Like :meth:`_own`, with the client's task in ``host`` (a :class:`ToolsetHost`)."""
        try:
            await self._connect(host, conn)
            yield conn.tools
        finally:
            try:
                await self._last_user_left()
            finally:
                self._here.conn = None
                conn.stop.set()
                conn.ready.set()
                # the SDK's shutdown is bounded (stdin closed, then terminate, then kill)
                with anyio.CancelScope(shield=True, deadline=anyio.current_time() + _SHUTDOWN_WAIT):
                    await conn.done.wait()

    async def _last_user_left(self) -> None:
        here = self._here
        async with here.cond:  # other users (concurrent runs) finish first
            while here.users > 1:
                await here.cond.wait()

    async def _connect(self, tg: anyio.abc.TaskGroup | ToolsetHost, conn: Connection) -> None:
        conn.spawn = tg
        tg.start_soon(self._host, conn)
        with anyio.move_on_after(self.connect_timeout) as waited:
            await conn.ready.wait()
        if waited.cancelled_caught:
            conn.scope.cancel()
            raise ToolError(
                f"MCP server {self.name!r} did not start within {self.connect_timeout:g}s (connect_timeout)",
                metadata={"mcp_server": self.name},
            )
        if conn.client is None:
            err = conn.error
            why = describe(err) if err is not None else "the connection closed"
            raise ToolError(
                f"MCP server {self.name!r} could not be started: {why}", metadata={"mcp_server": self.name}
            ) from err
        log.debug("mcp server open", server=self.name, tools=[t.name for t in conn.tools])

    async def _host(self, conn: Connection) -> None:
        """Own the ``mcp`` client (and its task group) in a task of its own; never raises."""
        generation, ready, stop, done = conn.generation, conn.ready, conn.stop, conn.done

        def current() -> bool:  # this session, not a later one
            return conn.generation == generation

        def ended() -> None:  # the SDK closed the transport: the server's side ended
            if current() and not stop.is_set() and conn.lost is None:
                conn.lost = "is not running (it closed the connection)"
                log.warning("mcp server connection lost", server=self.name)

        try:
            with conn.scope:
                async with AsyncExitStack() as stack:
                    client = await stack.enter_async_context(self._client(stack, lambda t: watched(t, ended)))
                    conn.tools = await listed_tools(self, client)
                    conn.client = client
                    ready.set()
                    await stop.wait()
        except Exception as exc:
            if current():
                conn.error = exc
            log.warning("mcp server connection ended", server=self.name, error=describe(exc))
        finally:
            if current():
                conn.closed = True
            ready.set()
            done.set()

    # -- calls ------------------------------------------------------------------------------

    async def call(self, tool: str, arguments: Mapping[str, Any]) -> ToolOutcome:
        """Call ``tool`` (its name on the server) and map the answer to a tool outcome.

        A call left without an answer (its connection ended, or ``timeout`` passed) takes one
        path: sent, it may have run; never sent, it did not (module docstring).

        Raises:
            ToolOutcomeUnknown: ``critical``: the server had the call, then its connection
                ended or it did not answer within ``timeout`` (whether it ran is unknown).
            ToolError: ``retriable``: the call was not sent (the server could not be reached
                again, or the request could not be handed over within ``timeout``).
        """
        conn = self._here.conn
        if conn is not None and conn.renewing:  # another call is reconnecting: wait for it
            async with conn.gate:
                pass
        if conn is None or (conn.client is None and not conn.generation):
            return self._error(tool, "is not open (tools of an MCP server can only be called during a run)")
        reconnected = False
        while True:
            if conn.lost is not None or conn.closed:  # nothing of this call has reached the server yet
                if reconnected:
                    raise unreached(self.name, tool, conn.lost or "closed the connection again")
                await self._reconnect(conn, conn.generation, tool)
                reconnected = True
                continue  # look again: another call's reconnection may have failed
            assert conn.client is not None
            generation = conn.generation
            cause: Exception | None = None
            try:
                with sending() as attempt, anyio.move_on_after(self.timeout) as waited:
                    result = await conn.client.call_tool(tool, dict(arguments), meta=call_meta())
            except Exception as exc:
                why = failure(exc)
                if not why.startswith("is not running"):
                    return self._error(tool, why)  # the server answered: the outcome is known
                if conn.generation == generation:  # not a session another call opened since
                    conn.lost = conn.lost or why
                cause = exc
            else:
                if not waited.cancelled_caught:
                    break
                why = f"did not answer within {self.timeout:g}s"
            # no answer: the connection ended (cause) or the time ran out, one decision for both
            timed_out = cause is None
            if attempt.sent and self._is_repeatable(tool):  # it may have run, and running twice is harmless
                return self._error(tool, f"{why} (it may be called again)")
            if attempt.sent:  # the server had it: it may have run
                raise unknown(self.name, tool, why, timed_out=timed_out) from cause
            if timed_out:  # the request was never handed over: it did not run
                raise unreached(self.name, tool, f"no request sent within {self.timeout:g}s", again=False)
            # the connection had ended before the request went out: reconnect and send it (once)
        text = content_text(result.content, result.structured_content)
        if result.is_error:
            return ToolOutcome(f"{tool} failed: {text or 'the MCP server reported an error'}", is_error=True)
        return ToolOutcome(text)

    async def _reconnect(self, conn: Connection, generation: int, tool: str) -> None:
        """Stop the ended session and connect again, unless another call already did."""
        async with conn.gate:
            if conn.generation != generation:
                return
            assert conn.spawn is not None
            log.warning("mcp server reconnecting", server=self.name, tool=tool, why=conn.lost or "closed")
            conn.renewing = True
            try:
                conn.stop.set()
                with anyio.CancelScope(shield=True, deadline=anyio.current_time() + _SHUTDOWN_WAIT):
                    await conn.done.wait()
                conn.scope.cancel()  # a shutdown that did not finish in time
                conn.renew()
                await self._connect(conn.spawn, conn)
            except ToolError as exc:
                conn.lost = str(exc)  # a call waiting on the gate must not take the ending session for a live one
                raise unreached(self.name, tool, str(exc)) from exc
            finally:
                conn.renewing = False

    def repeats(self, tool: str, *, hinted: bool) -> bool:
        """Whether ``tool`` (its server name; ``hinted``: marked read-only or idempotent) is harmless to call twice.

        The one answer, for the server's calls and the run's retries (:attr:`MCPTool.repeatable`).
        """
        return hinted if self.repeatable == "hinted" else tool in self.repeatable

    def _is_repeatable(self, tool: str) -> bool:
        return self.repeats(tool, hinted=any(t.remote_name == tool and t.hinted_repeatable for t in self.tools))

    def _error(self, tool: str, what: str) -> ToolOutcome:
        log.warning("mcp tool call failed", server=self.name, tool=tool, why=what)
        return ToolOutcome(f"{tool} failed: MCP server {self.name!r} {what}", is_error=True)
