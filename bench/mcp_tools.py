"""What a tool call costs when the tool lives on an MCP server, beside a local ``@tool``.

Job: one agent run with a fake model that calls ``add(a, b)`` once and then answers. The tool
is a local function, or the same function on an MCP server built with the ``mcp`` package
(``tests/mcp_servers/toolbox.py``) reached over stdio or streamable HTTP on 127.0.0.1, kept
open with ``async with server:`` (the process is not started per run). A last row times a
run that starts and stops the stdio server itself (no ``async with``). Timings alternate
between the variants, median of N (N/10 for the cold row).

Usage: ``python bench/mcp_tools.py [N]``
"""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _cli import runs_arg

from jeeves_router import Agent
from jeeves_router.mcp import MCPServer, MCPServerHTTP, MCPServerStdio
from jeeves_router.testing import Call, ScriptedModel
from jeeves_router.tools import Tool, tool

TOOLBOX = str(ROOT / "tests" / "mcp_servers" / "toolbox.py")


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def make_run(tools: list[Tool | MCPServer]) -> Callable[[], Awaitable[None]]:
    async def one() -> None:
        agent = Agent("x", model=ScriptedModel([Call("add", {"a": 1, "b": 2}), "3"]), tools=tools)
        result = await agent.run("add")
        assert result.output == "3"

    return one


async def timed(fn: Callable[[], Awaitable[None]]) -> float:
    t0 = time.perf_counter()
    await fn()
    return time.perf_counter() - t0


async def main(n: int) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    http = await anyio.open_process(
        [sys.executable, TOOLBOX, "--http", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        stdio = MCPServerStdio(sys.executable, [TOOLBOX], name="stdio")
        over_http = MCPServerHTTP(f"http://127.0.0.1:{port}/mcp", name="http", connect_timeout=60)
        with anyio.fail_after(60):
            while True:
                try:
                    await (await anyio.connect_tcp("127.0.0.1", port)).aclose()
                    break
                except OSError:
                    await anyio.sleep(0.1)
        async with stdio, over_http:
            variants = {
                "local @tool": make_run([add]),
                "MCP stdio (open)": make_run([stdio]),
                "MCP HTTP (open)": make_run([over_http]),
            }
            times: dict[str, list[float]] = {k: [] for k in variants}
            for fn in variants.values():  # warm up
                await fn()
            for _ in range(n):
                for name, fn in variants.items():
                    times[name].append(await timed(fn))
        cold = make_run([MCPServerStdio(sys.executable, [TOOLBOX], name="cold")])
        cold_times = [await timed(cold) for _ in range(max(3, n // 10))]
    finally:
        http.terminate()
        with anyio.CancelScope(shield=True):
            await http.wait()
            await http.aclose()
    base = statistics.median(times["local @tool"])
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; N={n}")
    print(f"{'variant':28} {'median ms':>10} {'x local':>8}")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"{name:28} {med * 1e3:10.2f} {med / base:8.1f}")
    med = statistics.median(cold_times)
    print(f"{'MCP stdio, started per run':28} {med * 1e3:10.2f} {med / base:8.1f}  (N={len(cold_times)})")


if __name__ == "__main__":
    anyio.run(main, runs_arg(__doc__, default=100))
