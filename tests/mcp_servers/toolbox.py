"""A small MCP server for the tests, built with the ``mcp`` package (not a test module).

Usage: ``python toolbox.py [--http PORT] [--log FILE] [--max-starts N [--stuck]] [--malformed]``. Over
stdio by default; ``--http PORT`` serves streamable HTTP on 127.0.0.1. Every call of
``lookup_invoice`` is appended to ``--log``, so tests can count calls across processes.
``--max-starts N`` exits (code 4) instead of serving once ``--log`` holds N starts; with
``--stuck`` it hangs instead (a server stuck at its start, which never answers the handshake).
``--malformed`` serves a low-level server whose one tool answers with content that breaks its
own output schema.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

import anyio
from mcp.server.mcpserver import Context  # module level: the SDK resolves the tools' string annotations here


def _log(path: str | None, line: str) -> None:
    if path:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)


def toolbox(log: str | None) -> Any:
    from mcp.server.mcpserver import MCPServer

    srv = MCPServer("toolbox", instructions="Test tools.", log_level="WARNING")

    @srv.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @srv.tool()
    def lookup_invoice(invoice: str) -> str:
        """Look up an invoice by its id."""
        _log(log, f"lookup_invoice {invoice}")
        return f"invoice {invoice}: 42.00 EUR, charged twice"

    @srv.tool()
    async def refund(invoice: str, ctx: Context) -> str:
        """Refund an invoice; logs the idempotency key of the request's _meta.

        An invoice named ``HANG-...`` hangs on its first call (a call cut off mid-way).
        """
        seen = await anyio.Path(log).read_text() if log and await anyio.Path(log).exists() else ""
        first = f"refund {invoice} " not in seen
        meta = ctx.request_context.meta or {}
        _log(log, f"refund {invoice} key={meta.get('jeeves-router/idempotency-key')}")
        if first and invoice.startswith("HANG-"):
            await anyio.sleep_forever()
        return f"refunded {invoice}"

    @srv.tool(name="docs.search")
    def docs_search(query: str) -> str:
        """Search the docs (a tool name with a dot)."""
        return f"no docs for {query!r}"

    @srv.tool()
    def fail(reason: str) -> str:
        """Always fails."""
        from mcp.server.mcpserver.exceptions import ToolError

        raise ToolError(f"cannot do that: {reason}")

    @srv.tool()
    def crash() -> str:
        """Kill the server process in the middle of the call."""
        _log(log, "crash")
        os._exit(3)

    @srv.tool()
    async def hang() -> str:
        """Never answer (the server stays responsive otherwise)."""
        _log(log, "hang")
        await anyio.sleep_forever()
        return "never"

    from mcp.types import ToolAnnotations

    @srv.tool(annotations=ToolAnnotations(readOnlyHint=True))
    async def slow_read() -> str:
        """Never answer, like ``hang``; the server marks it read-only."""
        _log(log, "slow_read")
        await anyio.sleep_forever()
        return "never"

    @srv.tool()
    def freeze() -> str:
        """Block the whole server process (it no longer reads its input)."""
        _log(log, "freeze")
        time.sleep(3600)  # the point of this tool: a server that is stuck
        return "never"

    @srv.tool()
    def pid() -> int:
        """The server's process id."""
        return os.getpid()

    return srv


def malformed() -> Any:
    import mcp_types as types
    from mcp.server.lowlevel import Server

    async def list_tools(ctx: Any, params: Any) -> Any:
        schema = {"type": "object", "properties": {"total": {"type": "number"}}, "required": ["total"]}
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name="total",
                    description="Sum an invoice.",
                    input_schema={"type": "object", "properties": {}},
                    output_schema=schema,
                )
            ]
        )

    async def call_tool(ctx: Any, params: Any) -> Any:
        return types.CallToolResult(
            content=[types.TextContent(text="total: lots")], structured_content={"total": "lots"}
        )

    return Server("malformed", on_list_tools=list_tools, on_call_tool=call_tool)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, default=None)
    parser.add_argument("--log", default=None)
    parser.add_argument("--malformed", action="store_true")
    parser.add_argument("--max-starts", type=int, default=None)
    parser.add_argument("--stuck", action="store_true")
    args = parser.parse_args()
    if args.max_starts is not None and args.log and os.path.exists(args.log):
        with open(args.log) as f:
            if sum(line.startswith("started") for line in f) >= args.max_starts:
                if args.stuck:
                    time.sleep(3600)  # killed by the client that gives up on it
                sys.exit(4)
    if args.malformed:
        from mcp.server.stdio import stdio_server

        server = malformed()

        async def serve() -> None:
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())

        anyio.run(serve)
        return
    srv = toolbox(args.log)
    _log(args.log, f"started {os.getpid()}")
    if args.http is not None:
        srv.run("streamable-http", host="127.0.0.1", port=args.http)
    else:
        srv.run()
    sys.exit(0)


if __name__ == "__main__":
    main()
