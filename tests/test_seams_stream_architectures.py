"""Seams: leaving, cancelling and handing on ``agent.stream()`` of every architecture.

The stream tests elsewhere use a Router with a static classifier. Here each architecture a
user composes (a Router with an LLM classifier, with the embedded classifier and its hashing
encoder, with a cascade; a HandoffRouter; Capabilities) runs one desk — text, a tool, a
handoff (:mod:`tests.stream_desks`) — and its stream is:

* left at its first text, as its tool is called, at its handoff (``break`` alone, ``break``
  then ``aclose()``, ``async with``): no warning, no unraisable exception, no "Task was
  destroyed", no task left; the events read are the full run's, each once; every request
  sent counts once in ``spent``;
* cancelled while its tool waits: the same, the tool having run once;
* read on by another task than the one that read its first events, journaled or not: the
  same events as a run read by one task, and the journal holds them;
* read at the same time as a second stream of the same agent on one SQLite journal, one of
  the two cancelled mid-way: the other completes, each journal session holds its own
  stream's events (no cross-talk) and its end (``cut`` with what it spent, ``completed``).

All of these held when written (no fix needed); they guard the combinations.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from jeeves_router import Agent
from jeeves_router.agent import RunStream
from jeeves_router.events import Event, event_adapter
from jeeves_router.journal import JournalRuntime, SQLiteJournal
from tests.stream_desks import ARCHS, Team, build, nothing_left_behind, quiet_loop
from tests.task_helpers import pending_tasks, settled_tasks

pytestmark = pytest.mark.anyio

PROMPT = "I was charged twice, refund INV-7"


def sig(ev: Event) -> tuple[Any, ...]:
    """What tells one event of a run from another (not its time)."""
    return (ev.kind, ev.path, ev.session_id, getattr(ev, "text", None), getattr(ev, "call_id", None))


async def full_run(arch: str) -> list[tuple[Any, ...]]:
    return [sig(ev) async for ev in build(arch, Team()).stream(PROMPT, session_id="s")]


async def leave(stream: RunStream, stop: str, how: str) -> list[Event]:
    """Read ``stream`` up to its first ``stop`` event, then leave it ``how`` (``"break"``: leave it open)."""
    seen: list[Event] = []

    async def read() -> None:
        async for ev in stream:
            seen.append(ev)
            if ev.kind == stop:
                break

    if how == "async with":
        async with stream:
            await read()
    else:
        await read()
        if how == "aclose":
            await stream.aclose()
    return seen


async def leave_by_break(agent: Agent, stop: str) -> list[Event]:
    """``break`` out of ``async for ev in agent.stream(...)``: the stream is dropped, the loop closes it."""
    seen: list[Event] = []
    async for ev in agent.stream(PROMPT, session_id="s"):
        seen.append(ev)
        if ev.kind == stop:
            break
    return seen


@pytest.mark.parametrize("how", ["break", "aclose", "async with"])
@pytest.mark.parametrize("stop", ["text.delta", "tool.called", "handoff.completed"])
@pytest.mark.parametrize("arch", ARCHS)
async def test_leaving_a_stream_of_any_architecture_is_clean_and_counts_once(arch: str, stop: str, how: str) -> None:
    reference = await full_run(arch)
    team = Team()
    agent = build(arch, team)
    before = await settled_tasks()
    with nothing_left_behind() as problems:
        if how == "break":
            seen = await leave_by_break(agent, stop)
        else:
            stream = agent.stream(PROMPT, session_id="s")
            seen = await leave(stream, stop, how)
            assert stream.error is None and stream.result is None
            assert stream.spent.requests == team.sent()  # each request sent counts once
        await quiet_loop()
    assert [sig(ev) for ev in seen] == reference[: len(seen)] and seen[-1].kind == stop  # each event once
    assert problems == [] and pending_tasks() <= before
    # a stream runs as it is read: left at tool.called, the tool never runs; left after it, it ran once
    assert len(team.lookups) == stop.startswith("handoff.")


@pytest.mark.parametrize("how", ["none", "aclose", "async with"])
@pytest.mark.parametrize("arch", ARCHS)
async def test_cancelling_the_reader_while_a_tool_waits_is_clean(arch: str, how: str) -> None:
    team = Team(gate=anyio.Event())
    agent = build(arch, team)
    before = await settled_tasks()
    kinds: list[str] = []
    with nothing_left_behind() as problems:
        stream = agent.stream(PROMPT, session_id="s")
        reading = anyio.CancelScope()

        async def read() -> None:
            with reading:
                if how == "async with":
                    async with stream:
                        async for ev in stream:
                            kinds.append(ev.kind)
                else:
                    async for ev in stream:
                        kinds.append(ev.kind)

        async with anyio.create_task_group() as tg:
            tg.start_soon(read)
            await team.tool_started.wait()
            reading.cancel()
        if how == "aclose":
            await stream.aclose()
        await quiet_loop()
    assert reading.cancelled_caught and problems == [] and pending_tasks() <= before
    assert kinds[-1] == "tool.called" and kinds.count("tool.called") == 1
    assert team.lookups == ["s:INV-7"] and stream.error is None and stream.result is None
    assert stream.spent.requests == team.sent()


@pytest.mark.parametrize("journaled", [False, True], ids=["plain", "journal"])
@pytest.mark.parametrize("stop", ["tool.called", "handoff.requested"])
@pytest.mark.parametrize("arch", ARCHS)
async def test_a_stream_read_on_by_another_task_gives_the_same_run(
    tmp_path: Path, arch: str, stop: str, journaled: bool
) -> None:
    reference = await full_run(arch)
    journal = SQLiteJournal(tmp_path / "j.db") if journaled else None
    agent = build(arch, Team(), **({"runtime": JournalRuntime(journal)} if journal else {}))
    before = await settled_tasks()
    with nothing_left_behind() as problems:
        stream = agent.stream(PROMPT, session_id="s")
        seen = await leave(stream, stop, "break")  # this task reads the first events

        async def read_on() -> None:
            seen.extend([ev async for ev in stream])

        async with anyio.create_task_group() as tg:
            tg.start_soon(read_on)
        await quiet_loop()
    assert [sig(ev) for ev in seen] == reference
    assert problems == [] and pending_tasks() <= before
    assert stream.result is not None and stream.result.output == "Refund done."
    if journal is not None:
        entries = await journal.read("s", types=("event", "run.end"))
        events = [e.record.event for e in entries if e.record.type == "event"]
        assert events == [event_adapter().dump_python(ev, mode="json") for ev in seen]
        assert [e.record.status for e in entries if e.record.type == "run.end"] == ["completed"]


@pytest.mark.parametrize("arch", ARCHS)
async def test_two_streams_on_one_journal_one_cancelled_mid_way_keep_apart(tmp_path: Path, arch: str) -> None:
    reference = await full_run(arch)
    journal = SQLiteJournal(tmp_path / "j.db")
    team = Team(gates={"a": anyio.Event(), "b": anyio.Event()})
    agent = build(arch, team, runtime=JournalRuntime(journal))
    before = await settled_tasks()
    seen: dict[str, list[Event]] = {"a": [], "b": []}
    streams: dict[str, RunStream] = {}
    scopes = {"a": anyio.CancelScope(), "b": anyio.CancelScope()}
    with nothing_left_behind() as problems:

        async def read(sid: str) -> None:
            with scopes[sid]:
                async with agent.stream(PROMPT, session_id=sid) as streams[sid]:
                    async for ev in streams[sid]:
                        seen[sid].append(ev)

        async with anyio.create_task_group() as tg:
            tg.start_soon(read, "a")
            tg.start_soon(read, "b")
            await team.started["a"].wait()
            await team.started["b"].wait()  # both wait in their tools
            scopes["a"].cancel()
            await quiet_loop()
            team.gates["b"].set()
        await quiet_loop()
    assert problems == [] and pending_tasks() <= before
    assert scopes["a"].cancelled_caught and seen["a"][-1].kind == "tool.called"
    # b's run is the one-task run under its own session (the shared test model numbers its calls on: no call ids)
    assert [sig(ev)[:4] for ev in seen["b"]] == [(k, p, sid.replace("s", "b", 1), t) for k, p, sid, t, _ in reference]
    assert streams["b"].result is not None and streams["b"].result.output == "Refund done."
    assert sorted(team.lookups) == ["a:INV-7", "b:INV-7"]
    for sid, end in (("a", "cut"), ("b", "completed")):
        entries = await journal.read(sid)
        events = [e.record.event for e in entries if e.record.type == "event"]
        assert events == [event_adapter().dump_python(ev, mode="json") for ev in seen[sid]]  # its own, each once
        [last] = [e.record for e in entries if e.record.type == "run.end"]
        assert last.status == end  # type: ignore[union-attr]
    [cut] = [e.record for e in await journal.read("a", types=("run.end",))]
    assert cut.usage is not None and cut.usage["requests"] == streams["a"].spent.requests  # type: ignore[union-attr]
    assert streams["a"].spent.requests + streams["b"].spent.requests == team.sent()
