"""Shared helpers of the MCP tests (not a test module): server commands, free ports, child processes."""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.abc

ROOT = Path(__file__).resolve().parents[1]
TOOLBOX = str(ROOT / "tests" / "mcp_servers" / "toolbox.py")
ENV = {"PYTHONPATH": str(ROOT)}


def child_pids() -> set[int]:
    """Processes (zombies included) whose parent is this test process, read from /proc."""
    me = os.getpid()
    found: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # the command name (field 2) may hold spaces; the fields after the last ')' are plain
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == me:
            found.add(int(entry))
    return found


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def wait_listening(port: int, proc: anyio.abc.Process) -> None:
    """Wait (cancellably, bounded by the caller) until ``port`` accepts connections."""
    while True:
        assert proc.returncode is None, f"the server exited with {proc.returncode}"
        try:
            stream = await anyio.connect_tcp("127.0.0.1", port)
        except OSError:
            await anyio.sleep(0.05)
            continue
        await stream.aclose()
        return


@asynccontextmanager
async def http_process(*args: str) -> AsyncIterator[tuple[anyio.abc.Process, int]]:
    """Start ``python *args --port/--http PORT`` style servers; terminate and reap them on exit."""
    port = free_port()
    argv = [sys.executable, *[a.replace("{port}", str(port)) for a in args]]
    proc = await anyio.open_process(argv, env={**os.environ, **ENV}, cwd=ROOT, stdout=None, stderr=None)
    try:
        with anyio.fail_after(60):
            await wait_listening(port, proc)
        yield proc, port
    finally:
        with anyio.CancelScope(shield=True):
            if proc.returncode is None:
                proc.terminate()
                with anyio.move_on_after(10):
                    await proc.wait()
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()
            await proc.aclose()


async def wait_for_text(path: Path, text: str) -> None:
    """Wait (cancellably, bounded by the caller) until the file ``path`` contains ``text``."""
    file = anyio.Path(path)
    while True:
        if await file.exists() and text in await file.read_text():
            return
        await anyio.sleep(0.05)  # another process writes the file: nothing to wait on but time
