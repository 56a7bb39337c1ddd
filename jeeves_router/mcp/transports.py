"""The two ways to reach an MCP server: a subprocess over stdio, and streamable HTTP."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ..errors import UsageError
from ._link import refused
from .client import MCPServer, Watch

if TYPE_CHECKING:
    from mcp import Client

__all__ = ["MCPServerStdio", "MCPServerHTTP"]


class MCPServerStdio(MCPServer):
    """An MCP server started as a subprocess, spoken to over its stdin and stdout.

    The process starts when the server is opened (by a run, or ``async with``) and is
    stopped when it is closed: stdin is closed, then the process group is terminated and
    killed if it does not exit within a few seconds.

    Args:
        command: The executable, e.g. ``"uvx"`` or ``sys.executable``.
        args: Its arguments.
        env: Extra environment variables (only a few safe ones such as ``PATH`` and
            ``HOME`` are inherited; pass secrets here explicitly).
        cwd: Working directory.
        errlog: Where the server's stderr goes (default ``sys.stderr``).
        name: Name for logs and errors (default: the command).
        **options: ``timeout``, ``connect_timeout``, ``tool_prefix``, ``allowed_tools``
            (see :class:`MCPServer`).

    Example:
        An agent whose tools come from the ``mcp-server-fetch`` server (needs ``uvx``, the
        network and an OpenAI key)::

            from jeeves_router import Agent
            from jeeves_router.mcp import MCPServerStdio

            fetch = MCPServerStdio("uvx", ["mcp-server-fetch"], timeout=20)
            agent = Agent("You read web pages.", model="openai:gpt-4.1-mini", tools=[fetch])
    """

    def __init__(
        self,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        errlog: TextIO | None = None,
        name: str | None = None,
        **options: Any,
    ) -> None:
        if not isinstance(command, str) or not command:
            raise UsageError(f"MCPServerStdio needs a command (an executable), got {command!r}")
        if isinstance(args, str):
            raise UsageError(f"MCPServerStdio args must be a list of strings, got the string {args!r}")
        super().__init__(name=name or Path(command).name, **options)
        self.command = command
        self.args = [str(a) for a in args]
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.errlog = errlog

    def _client(self, stack: AsyncExitStack, watch: Watch) -> Client:
        from mcp import Client, StdioServerParameters
        from mcp.client.stdio import stdio_client

        params = StdioServerParameters(command=self.command, args=self.args, env=self.env, cwd=self.cwd)
        return Client(watch(stdio_client(params, errlog=self.errlog or sys.stderr)))


class MCPServerHTTP(MCPServer):
    """An MCP server reached over streamable HTTP.

    Args:
        url: The endpoint, e.g. ``"http://127.0.0.1:8000/mcp"``.
        headers: HTTP headers for every request (e.g. authorization; never logged).
        name: Name for logs and errors (default: the URL's host and port).
        **options: ``timeout``, ``connect_timeout``, ``tool_prefix``, ``allowed_tools``
            (see :class:`MCPServer`).
    """

    def __init__(
        self, url: str, *, headers: Mapping[str, str] | None = None, name: str | None = None, **options: Any
    ) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise UsageError(f"MCPServerHTTP needs an http:// or https:// URL, got {url!r}")
        super().__init__(name=name or url.split("://", 1)[1].split("/", 1)[0].rpartition("@")[2], **options)
        self.url = url
        self.headers = dict(headers or {})

    def _client(self, stack: AsyncExitStack, watch: Watch) -> Client:
        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        class Refusals(httpx2.AsyncHTTPTransport):
            """Tells the client that a call's POST was refused at connect: it never reached the server."""

            async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
                try:
                    return await super().handle_async_request(request)
                except httpx2.ConnectError:
                    if request.method == "POST":
                        refused()
                    raise

        timeout = httpx2.Timeout(30.0, read=300.0)  # the SDK's own defaults
        http = httpx2.AsyncClient(headers=self.headers, timeout=timeout, transport=Refusals())
        stack.push_async_callback(http.aclose)
        return Client(watch(streamable_http_client(self.url, http_client=http)))
