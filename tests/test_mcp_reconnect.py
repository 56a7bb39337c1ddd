"""A long-lived MCP connection whose server died: the next call reconnects; no call that may have run is sent again."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import anyio
import pytest

from jeeves_router import Agent, Recovery
from jeeves_router.architectures import ToolLoop
from jeeves_router.errors import ToolError
from jeeves_router.events import RecoveryReport, RecoveryRetry, ToolResult
from jeeves_router.mcp import MCPServer, MCPServerHTTP, MCPServerStdio
from jeeves_router.testing import Call, RecordedSleeps, ScriptedModel, capture_events
from tests.mcp_helpers import ENV, TOOLBOX, alive, http_process

pytest.importorskip("mcp")
pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("no_process_left")]


def toolbox(log: Path, *extra: str) -> MCPServerStdio:
    args = [TOOLBOX, "--log", str(log), *extra]
    return MCPServerStdio(sys.executable, args, env=ENV, name="toolbox", timeout=120.0, connect_timeout=120.0)


def starts(log: Path) -> int:
    return sum(line.startswith("started") for line in log.read_text().splitlines())


async def server_pid(server: MCPServer) -> int:
    outcome = await Agent("x", model=ScriptedModel([Call("pid"), "ok"]), tools=[server]).run("pid?")
    [part] = [p for m in outcome.messages if m.role == "tool" for p in m.parts]
    return int(part.content)  # type: ignore[union-attr]


async def kill(server: MCPServerStdio, pid: int) -> None:
    """Kill the server's process, and wait (bounded) until the client has seen its connection end."""
    os.kill(pid, signal.SIGKILL)
    with anyio.fail_after(60):  # a hang guard
        while server.is_open:  # noqa: ASYNC110 - the client's reader task sees the pipe end: nothing to wait on
            await anyio.sleep(0.02)


async def test_a_call_after_the_server_was_killed_starts_it_again_and_runs(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    server = toolbox(log)
    async with server:
        first = await server_pid(server)
        await kill(server, first)
        model = ScriptedModel([Call("lookup_invoice", {"invoice": "INV-7"}), "Charged twice."])
        events = await capture_events(Agent("x", model=model, tools=[server]), "INV-7?")
        [result] = [ev for ev in events if isinstance(ev, ToolResult)]
        assert not result.is_error and result.content == "invoice INV-7: 42.00 EUR, charged twice"
        assert server.is_open
        second = await server_pid(server)
        assert second != first and alive(second) and not alive(first)
    assert not alive(second)
    assert starts(log) == 2 and log.read_text().count("lookup_invoice INV-7") == 1


async def test_a_call_the_server_had_when_it_died_is_not_sent_again(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    server = toolbox(log)
    async with server:
        agent = Agent("x", model=ScriptedModel([Call("crash"), "unused"]), tools=[server])
        with pytest.raises(ToolError, match="whether it ran is unknown") as raised:
            await agent.run("go")
        assert "MCP server 'toolbox'" in str(raised.value) and raised.value.severity == "critical"
        assert raised.value.metadata["outcome"] == "unknown"
        # the recovery ladder reads it as critical: a report, no retry of the call
        sleeps = RecordedSleeps()
        model = ScriptedModel([Call("crash"), "unused"])
        events = await capture_events(
            Agent("x", model=model, tools=[server], architecture=ToolLoop(recovery=Recovery(sleep=sleeps))), "go"
        )
        assert not [ev for ev in events if isinstance(ev, RecoveryRetry)]
        [report] = [ev for ev in events if isinstance(ev, RecoveryReport)]
        assert report.severity == "critical"
        assert await server_pid(server) > 0  # and the next call reconnects
    assert log.read_text().count("crash") == 2 and starts(log) == 3  # each crash ran once


async def test_a_server_that_cannot_be_started_again_is_a_retriable_error_and_nothing_is_sent(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    server = toolbox(log, "--max-starts", "1")
    async with server:
        await kill(server, await server_pid(server))
        agent = Agent(
            "x", model=ScriptedModel([Call("lookup_invoice", {"invoice": "INV-7"}), "unused"]), tools=[server]
        )
        with pytest.raises(ToolError, match=r"could not be reached again .*the call was not sent") as raised:
            await agent.run("go")
        assert raised.value.severity == "retriable" and "MCP server 'toolbox'" in str(raised.value)
        # with recovery, the ladder's own retries ask for the server again (one reconnection each)
        sleeps = RecordedSleeps()
        model = ScriptedModel([Call("lookup_invoice", {"invoice": "INV-7"}), "unused"])
        agent = Agent("x", model=model, tools=[server], architecture=ToolLoop(recovery=Recovery(sleep=sleeps)))
        events = await capture_events(agent, "go")
        retries = [ev for ev in events if isinstance(ev, RecoveryRetry)]
        assert retries and {(r.operation, r.severity, r.error) for r in retries} == {
            ("tool:lookup_invoice", "retriable", "ToolError")
        }
    assert "lookup_invoice" not in log.read_text()
    assert starts(log) == 1


async def test_an_http_server_that_went_away_is_not_sent_the_call_and_is_reopened_once_back(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    lookup = [Call("lookup_invoice", {"invoice": "INV-7"}), "Charged twice."]
    async with http_process(TOOLBOX, "--http", "{port}", "--log", str(log)) as (proc, port):
        server = MCPServerHTTP(f"http://127.0.0.1:{port}/mcp", name="crm", timeout=120.0, connect_timeout=120.0)
        async with server:
            first = await server_pid(server)
            proc.kill()
            await proc.wait()
            with pytest.raises(ToolError, match=r"MCP server 'crm' could not be reached again .*the call was not sent"):
                await Agent("x", model=ScriptedModel(lookup), tools=[server]).run("INV-7?")  # refused: retriable
            async with http_process(TOOLBOX, "--http", str(port), "--log", str(log)):  # back on the same port
                events = await capture_events(Agent("x", model=ScriptedModel(lookup), tools=[server]), "INV-7?")
                [result] = [ev for ev in events if isinstance(ev, ToolResult)]
                assert not result.is_error and result.content == "invoice INV-7: 42.00 EUR, charged twice"
                assert await server_pid(server) != first
    assert starts(log) == 2 and log.read_text().count("lookup_invoice INV-7") == 1


async def test_two_calls_on_a_server_stuck_at_its_restart_both_fail_retriable(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    server = toolbox(log, "--max-starts", "1", "--stuck")
    async with server:
        await kill(server, await server_pid(server))
        server.connect_timeout = 0.5  # the restarted process never answers its handshake
        errors: list[BaseException] = []

        async def call() -> None:
            try:
                await server.call("lookup_invoice", {"invoice": "INV-7"})
            except Exception as exc:
                errors.append(exc)

        async with anyio.create_task_group() as tg:  # a model's two parallel tool calls
            tg.start_soon(call)
            tg.start_soon(call)
        assert [type(e) for e in errors] == [ToolError, ToolError], errors
        assert all(e.severity == "retriable" and "the call was not sent" in str(e) for e in errors)  # type: ignore[attr-defined]
        assert not server.is_open
    assert "lookup_invoice" not in log.read_text()


async def test_a_request_the_transport_refused_counts_as_not_sent_one_it_took_as_sent() -> None:
    from jeeves_router.mcp._link import Outbox, sending

    closed: list[bool] = []
    send, receive = anyio.create_memory_object_stream[str](1)
    outbox = Outbox(send, lambda: closed.append(True))
    with sending() as took:
        await outbox.send("tools/call 1")  # handed over: the server may run it
    await receive.aclose()  # the transport's writer ended (the server's stdin closed)
    with sending() as refused, pytest.raises(anyio.BrokenResourceError):
        await outbox.send("tools/call 2")
    assert took.sent and not refused.sent  # only a refused request may be sent again
    await outbox.aclose()
    assert closed == [True]
