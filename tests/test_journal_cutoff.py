"""A run cut off before its end (stream closed early, or cancelled) keeps the events its consumer saw.

The events of a journaled run wait to be written with the run's next recorded step; a run
cut off between two steps writes them when it is cut, with a ``run.end`` of status ``cut`` (it
stays resumable).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from jeeves_router import Agent, Router, RouterRoute, StaticClassifier
from jeeves_router.events import Event, TextDelta
from jeeves_router.journal import JournalRuntime, MemoryJournal, SQLiteJournal, recorded_events, session_turns
from jeeves_router.journal.base import Journal
from jeeves_router.journal.records import Entry, EventRecord, JournalError, RunEndRecord, RunStartRecord
from jeeves_router.messages import TextPart
from jeeves_router.models.base import ModelRequest, ModelResponse, ModelStreamItem, ModelTextDelta
from tests.journal_helpers import Wrapped, strip_ts
from tests.task_helpers import pending_tasks, settled_tasks

SEEN_KINDS = ["run.started", "router.classified", "router.dispatched", "run.started", "text.delta", "text.delta"]


class HangOnce:
    """Streams ``one two `` then waits forever (cancellably) on its first call; later calls finish."""

    def __init__(self) -> None:
        self.calls = 0
        self.waiting = anyio.Event()

    @property
    def name(self) -> str:
        return "test:hang-once"

    async def request(self, request: ModelRequest) -> ModelResponse:
        raise NotImplementedError

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        self.calls += 1
        yield ModelTextDelta("one ")
        yield ModelTextDelta("two ")
        if self.calls == 1:
            self.waiting.set()
            await anyio.sleep_forever()
        yield ModelTextDelta("three.")
        yield ModelResponse((TextPart("one two three."),))


class Breakable(Wrapped):
    """A journal in front of another whose appends fail or hang once ``mode`` is set."""

    def __init__(self, journal: Journal) -> None:
        super().__init__(journal)
        self.mode = ""

    async def append(self, entries: Sequence[Entry]) -> None:
        if self.mode == "fail":
            raise JournalError("disk full")
        if self.mode == "hang":
            await anyio.sleep_forever()
        await self.journal.append(entries)


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def journal(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Journal]:
    if request.param == "memory":
        yield MemoryJournal()
    elif request.param == "sqlite":
        async with SQLiteJournal(tmp_path / "j.db") as j:
            yield j
    else:
        from jeeves_router.journal import PostgresJournal
        from tests.test_journal_postgres import drop

        url: str = request.getfixturevalue("pg_url")
        table = f"jeeves_test_cut_{uuid.uuid4().hex[:12]}"
        async with PostgresJournal(url, table=table) as pg:
            yield pg
        await drop(url, table)


def desk(journal: Journal, model: Any) -> Agent:
    runtime = JournalRuntime(journal)
    billing = Agent("You resolve payments.", name="billing", model=model, runtime=runtime)
    return Agent(
        "Support desk",
        name="desk",
        runtime=runtime,
        architecture=Router([RouterRoute("billing", billing, "payments")], classifier=StaticClassifier("billing")),
    )


async def close_after_first_text(agent: Agent, session_id: str) -> list[Event]:
    """Stream a run and close the stream once the first text delta arrived."""
    seen: list[Event] = []
    async with agent.stream("charged twice", session_id=session_id) as events:
        async for ev in events:
            seen.append(ev)
            if isinstance(ev, TextDelta):
                break
    return seen


async def cancel_when_waiting(agent: Agent, model: HangOnce, session_id: str, how: str) -> None:
    """Run ``agent`` and cancel it from outside once its model waits (an anyio scope, or ``Task.cancel``)."""
    if how == "scope":
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:

                async def cancel() -> None:
                    await model.waiting.wait()
                    scope.cancel()

                tg.start_soon(cancel)
                await agent.run("charged twice", session_id=session_id)
        assert scope.cancelled_caught
    else:
        task = asyncio.ensure_future(agent.run("charged twice", session_id=session_id))
        await model.waiting.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def attempts(journal: Journal, session_id: str) -> list[tuple[str, int]]:
    """Each run.start / event / run.end entry of the session as (type, attempt), in order."""
    out = []
    for e in await journal.read(session_id):
        if isinstance(e.record, (RunStartRecord, EventRecord, RunEndRecord)):
            out.append((e.record.type, e.record.attempt))
    return out


async def end_statuses(journal: Journal, session_id: str) -> list[str]:
    """The status of each run.end entry of the session, in order."""
    return [e.record.status for e in await journal.read(session_id, types=("run.end",))]  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_a_stream_closed_early_keeps_the_events_its_consumer_saw(journal: Journal) -> None:
    model = HangOnce()
    before = await settled_tasks()
    seen = await close_after_first_text(desk(journal, model), "s")
    assert pending_tasks() <= before  # no task left behind
    assert [ev.kind for ev in seen] == SEEN_KINDS[:5]
    assert strip_ts(await recorded_events(journal, "s")) == strip_ts(seen)  # in order, once each
    kinds = [t for t, _ in await attempts(journal, "s")]
    assert kinds == ["run.start", *["event"] * 5, "run.end"]  # its run.end says "cut": the run stays resumable
    assert await end_statuses(journal, "s") == ["cut"]
    [turn] = await session_turns(journal, "s")
    assert (turn.status, turn.route, turn.confidence, turn.output) == ("cut", "billing", 1.0, None)


@pytest.mark.anyio
@pytest.mark.parametrize("how", ["scope", "task"])
async def test_a_cancelled_run_keeps_the_events_it_produced(journal: Journal, how: str) -> None:
    model = HangOnce()
    await cancel_when_waiting(desk(journal, model), model, "s", how)
    events = await recorded_events(journal, "s")
    assert [ev.kind for ev in events] == SEEN_KINDS
    assert [ev.text for ev in events if isinstance(ev, TextDelta)] == ["one ", "two "]
    assert [ev.path for ev in events][2:4] == [("desk",), ("desk", "billing")]
    assert await end_statuses(journal, "s") == ["cut"]


@pytest.mark.anyio
@pytest.mark.parametrize("cut", ["closed", "cancelled"])
async def test_resuming_a_cut_off_run_finishes_it_without_duplicate_events(journal: Journal, cut: str) -> None:
    model = HangOnce()
    agent = desk(journal, model)
    if cut == "closed":
        await close_after_first_text(agent, "s")
    else:
        await cancel_when_waiting(agent, model, "s", "scope")
    cut_events = [(t, a) for t, a in await attempts(journal, "s") if t == "event"]
    assert cut_events == [("event", 1)] * (5 if cut == "closed" else 6)  # the cut attempt's events are kept

    result = await agent.resume("s")
    assert (result.status, result.route, result.output) == ("ok", "billing", "one two three.")
    assert model.calls == 2  # the cut model call runs again; the classification is served from the journal
    events = await recorded_events(journal, "s")  # the latest attempt's, once each
    expected = [*SEEN_KINDS, "text.delta", "run.completed", "router.completed", "run.completed"]
    assert [ev.kind for ev in events] == expected
    assert "".join(ev.text for ev in events if isinstance(ev, TextDelta)) == "one two three."
    ends = [(t, a) for t, a in await attempts(journal, "s") if t != "event"]
    assert ends == [("run.start", 1), ("run.end", 1), ("run.start", 2), ("run.end", 2)]
    assert await end_statuses(journal, "s") == ["cut", "completed"]
    [turn] = await session_turns(journal, "s")
    assert (turn.status, turn.route, turn.output) == ("ok", "billing", "one two three.")

    again = await agent.resume("s")  # a completed run: replayed from the journal, no model call
    assert (again.status, again.output, model.calls) == ("ok", "one two three.", 2)
    assert [ev.kind for ev in await recorded_events(journal, "s")] == expected


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["fail", "hang"])
@pytest.mark.parametrize("cut", ["closed", "cancelled"])
async def test_a_journal_that_cannot_write_the_cut_off_events_does_not_change_how_the_run_ends(
    mode: str, cut: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="jeeves_router")
    journal = Breakable(MemoryJournal())
    model = HangOnce()
    agent = desk(journal, model)
    runtime = agent.runtime
    assert isinstance(runtime, JournalRuntime)
    runtime.flush_timeout_s = 0.01  # the hung write is given up (the cut is not held up by it)
    seen: list[Event] = []
    if cut == "closed":
        async with agent.stream("charged twice", session_id="s") as events:
            async for ev in events:
                seen.append(ev)
                if isinstance(ev, TextDelta):
                    journal.mode = mode
                    break
    else:

        async def broken_when_waiting() -> None:
            await model.waiting.wait()
            journal.mode = mode

        async with anyio.create_task_group() as tg:
            tg.start_soon(broken_when_waiting)
            await cancel_when_waiting(agent, model, "s", "scope")
    [record] = [r for r in caplog.records if r.name == "jeeves_router.journal.runtime"]
    assert record.levelno == logging.WARNING
    assert record.event == "journal.cut_events_lost"  # type: ignore[attr-defined]
    fields = record.fields  # type: ignore[attr-defined]
    assert fields["session_id"] == "s" and fields["entries"] >= 4
    assert fields["error"] == ("JournalError: disk full" if mode == "fail" else "timed out")
