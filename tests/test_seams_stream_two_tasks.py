"""Seams: one ``agent.stream()`` touched by two tasks at once.

A consumer task is waiting inside the run (a tool awaiting its answer) when another task
calls the stream's ``aclose()`` (a watchdog giving up, the creator's ``async with`` ending) or
asks it for an event too. Both used to reach into the run the consumer was driving: the close
threw into the consumer's wait and returned, and the consumer then waited forever for an
answer its (cleaned-up) wait would never get; a second ``__anext__`` resumed the consumer's
wait with nothing, and both tasks hung. An async generator refuses both (``RuntimeError:
... already running``); the stream now does too, with a message saying what to do, and the
consumer's run goes on untouched.

An agent with MCP tools, its stream read without ``async with`` (no host for the server's
connection): the connection's task group was entered inside the run, in the task reading it.
Read on by another task (a server's response task after the handler read the first events),
the run failed as it closed its server, its work done and its answer lost; read partly under
the reader's own cancel scope, the scopes exited out of order. The connection's task group now
runs in a task of its own (``TaskHost``).
"""

from __future__ import annotations

import anyio
import pytest

from jeeves_router import Agent
from jeeves_router.agent import RunStream
from jeeves_router.events import Event, ToolResult
from jeeves_router.testing import Call, Chunks, ScriptedModel
from tests.mcp_helpers import alive
from tests.stream_desks import Team, build, nothing_left_behind, quiet_loop
from tests.task_helpers import pending_tasks, settled_tasks

pytestmark = pytest.mark.anyio


async def second_task_meets_a_waiting_reader(how: str) -> tuple[list[str], RunStream, Team, BaseException | None]:
    """A task reads the stream to its end; while its tool waits, this task calls ``how`` on the stream."""
    team = Team(gate=anyio.Event())
    stream = build("router-llm", team).stream("refund INV-7", session_id="s")
    kinds: list[str] = []
    refused: BaseException | None = None

    async def read() -> None:
        async for ev in stream:
            kinds.append(ev.kind)

    with anyio.fail_after(30):  # only so that a regression fails instead of hanging
        async with anyio.create_task_group() as tg:
            tg.start_soon(read)
            await team.tool_started.wait()
            try:
                if how == "aclose":
                    await stream.aclose()
                else:
                    await stream.__anext__()
            except RuntimeError as exc:
                refused = exc
            assert team.gate is not None
            team.gate.set()
    return kinds, stream, team, refused


@pytest.mark.parametrize("how", ["aclose", "anext"])
async def test_a_second_task_is_refused_while_another_reads_and_the_reader_finishes(how: str) -> None:
    before = await settled_tasks()
    with nothing_left_behind() as problems:
        kinds, stream, team, refused = await second_task_meets_a_waiting_reader(how)
        await quiet_loop()
    assert isinstance(refused, RuntimeError)
    assert "another task" in str(refused) and "cancel" in str(refused)
    assert kinds.count("run.started") == 3 and kinds[-1] == "run.completed"  # desk, billing, general
    assert kinds.count("tool.result") == 2 and team.lookups == ["s:INV-7"]
    assert stream.error is None and stream.result is not None and stream.result.output == "Refund done."
    assert problems == [] and pending_tasks() <= before


async def test_the_stream_can_be_closed_once_the_other_task_is_done_with_it() -> None:
    team = Team(gate=anyio.Event())
    stream = build("router-llm", team).stream("refund INV-7", session_id="s")
    kinds: list[str] = []
    await settled_tasks()
    with nothing_left_behind() as problems:
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:

                async def read_until_the_tool() -> None:
                    async for ev in stream:
                        kinds.append(ev.kind)
                        if ev.kind == "tool.called":
                            break

                tg.start_soon(read_until_the_tool)
            await stream.aclose()  # in this task, the reader having left: the run stops cleanly
        await quiet_loop()
    assert kinds[-1] == "tool.called" and team.lookups == [] and stream.result is None
    assert problems == []


@pytest.mark.parametrize("stop", ["tool.called", "tool.result", "text.delta"])
async def test_an_agent_with_mcp_tools_read_on_by_another_task_completes(stop: str) -> None:
    # The run opens its MCP server while this task reads (no `async with`: no host), and another
    # task reads the rest. The connection's task group was entered in this task, inside the run,
    # and left in the other: the run failed as it closed its server ("Attempted to exit a cancel
    # scope that isn't the current tasks's current cancel scope"), its answer lost, its work done.
    pytest.importorskip("mcp")
    from tests.test_mcp_tools import toolbox

    agent = Agent("x", name="desk", model=ScriptedModel([Call("pid"), Chunks("done ", "now")]), tools=[toolbox()])
    before = await settled_tasks()
    with nothing_left_behind() as problems:
        stream = agent.stream("go")
        seen: list[Event] = []
        with anyio.fail_after(120):  # only so that a regression fails instead of hanging
            async for ev in stream:
                seen.append(ev)
                if ev.kind == stop:
                    break

            async def read_on() -> None:
                async for ev in stream:
                    seen.append(ev)

            async with anyio.create_task_group() as tg:
                tg.start_soon(read_on)
        await quiet_loop()
    assert [ev.kind for ev in seen][-3:] == ["text.delta", "text.delta", "run.completed"]
    assert stream.error is None and stream.result is not None and stream.result.output == "done now"
    [result] = [ev for ev in seen if isinstance(ev, ToolResult)]
    assert not result.is_error and not alive(int(result.content))  # the server ran the call, then was stopped
    assert problems == [] and pending_tasks() <= before


async def test_part_of_a_plain_stream_of_an_agent_with_mcp_tools_read_under_the_readers_own_cancel_scope() -> None:
    # Without `async with` the connection's task group was entered inside the run, inside the
    # reader's scope, and stayed entered as the reader left that scope: the scopes exited out of order.
    pytest.importorskip("mcp")
    from tests.test_mcp_tools import toolbox

    agent = Agent("x", name="desk", model=ScriptedModel([Call("pid"), Chunks("done ", "now")]), tools=[toolbox()])
    before = await settled_tasks()
    with nothing_left_behind() as problems:
        stream = agent.stream("go")
        with anyio.fail_after(120):  # the reader's own scope around the first part of the iteration
            async for ev in stream:
                if isinstance(ev, ToolResult):
                    pid = int(ev.content)
                    break
        assert alive(pid)  # the run is paused, its server open
        kinds = [ev.kind async for ev in stream]
        await quiet_loop()
    assert kinds[-1] == "run.completed" and stream.result is not None and stream.result.output == "done now"
    assert not alive(pid) and problems == [] and pending_tasks() <= before
