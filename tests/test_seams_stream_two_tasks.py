"""Seams: one ``agent.stream()`` touched by two tasks at once.

A consumer task is waiting inside the run (a tool awaiting its answer) when another task
calls the stream's ``aclose()`` (a watchdog giving up, the creator's ``async with`` ending) or
asks it for an event too. Both used to reach into the run the consumer was driving: the close
threw into the consumer's wait and returned, and the consumer then waited forever for an
answer its (cleaned-up) wait would never get; a second ``__anext__`` resumed the consumer's
wait with nothing, and both tasks hung. An async generator refuses both (``RuntimeError:
... already running``); the stream now does too, with a message saying what to do, and the
consumer's run goes on untouched.
"""

from __future__ import annotations

import anyio
import pytest

from jeeves_router.agent import RunStream
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
