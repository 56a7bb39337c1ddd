"""Shared helpers of the MCP and server tests (not a test module): server commands, child processes, their ports."""

from __future__ import annotations

import os
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


def listening_ports(pid: int) -> set[int]:
    """The TCP ports process ``pid`` listens on, read from /proc (its sockets' inodes in the TCP tables).

    A server started on port 0 is found on the port it got: no port is picked free and
    released for it first, which another process could take in between.
    """
    inodes: set[str] = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return set()
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    ports: set[int] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()  # sl, local_address, rem_address, st (0A: LISTEN), ..., inode (10th)
            if fields[3] == "0A" and fields[9] in inodes:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


async def wait_listening(proc: anyio.abc.Process) -> int:
    """Wait (cancellably, bounded by the caller) until ``proc`` listens; return its port."""
    while True:
        assert proc.returncode is None, f"the server exited with {proc.returncode}"
        ports = listening_ports(proc.pid)
        if ports:
            assert len(ports) == 1, f"the server listens on {sorted(ports)}"
            return ports.pop()
        await anyio.sleep(0.05)  # another process binds: nothing to wait on but time


@asynccontextmanager
async def http_process(*args: str) -> AsyncIterator[tuple[anyio.abc.Process, int]]:
    """Start ``python *args --port/--http {port}`` style servers on port 0; yield the process and its port.

    The server is terminated and reaped on exit.
    """
    argv = [sys.executable, *[a.replace("{port}", "0") for a in args]]
    proc = await anyio.open_process(argv, env={**os.environ, **ENV}, cwd=ROOT, stdout=None, stderr=None)
    try:
        with anyio.fail_after(120):  # a hang guard: a loaded machine starts Python slowly
            port = await wait_listening(proc)
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
