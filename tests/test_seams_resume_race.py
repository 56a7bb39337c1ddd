"""Seams: two processes resume the same unfinished run at the same moment.

Each ``resume`` reads the run's attempts, then writes a ``run.start`` with the next attempt
number. Two resumes that both read before either writes would both claim the same attempt,
and their entries would interleave under one (run, attempt): the recorded stream of the run
would hold both executions, and a later resume of the completed run would replay a mix of
them (one's recorded failure before the other's answer). Here two ``JournalRuntime``
instances (each on its own journal connection, as two processes would be) are made to
interleave at exactly that point: a journal wrapper holds each ``run.start`` append until
both resumes have read.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path

import anyio
import pytest

from jeeves_router import Agent, Router, RouterRoute
from jeeves_router.errors import ModelError
from jeeves_router.journal import (
    JournalRuntime,
    MemoryJournal,
    PostgresJournal,
    ResumeConflict,
    SQLiteJournal,
    ToolOutcomeUnknown,
    recorded_events,
    session_turns,
)
from jeeves_router.journal.base import Journal
from jeeves_router.journal.records import Entry, RunEndRecord, RunStartRecord
from jeeves_router.journal.resume import read_runs
from jeeves_router.journal.trace_data import load_trace
from jeeves_router.messages import TextPart
from jeeves_router.models.base import ModelRequest, ModelResponse, ModelStreamItem, ModelTextDelta
from jeeves_router.recovery import Recovery
from jeeves_router.testing import Call, RecordedSleeps, ScriptedModel, StaticClassifier
from jeeves_router.tools import tool
from jeeves_router.usage import Usage
from tests.journal_helpers import Wrapped
from tests.test_seams_journal import Breaking

USAGE = Usage(input_tokens=10, output_tokens=5, requests=1)


class Meet:
    """A one-shot rendezvous: each of ``n`` tasks waits in :meth:`wait` until all have arrived."""

    def __init__(self, n: int) -> None:
        self.n, self.arrived = n, 0
        self.all = anyio.Event()

    async def wait(self) -> None:
        self.arrived += 1
        if self.arrived == self.n:
            self.all.set()
        await self.all.wait()


class HeldStart(Wrapped):
    """A journal that holds its first ``run.start`` append at ``meet`` (after the resume has read)."""

    def __init__(self, journal: Journal, meet: Meet | None) -> None:
        super().__init__(journal)
        self.meet = meet
        self.starts: list[RunStartRecord] = []

    async def append(self, entries: Sequence[Entry]) -> None:
        started = [e.record for e in entries if isinstance(e.record, RunStartRecord)]
        if started and self.meet is not None and not self.starts:
            await self.meet.wait()
        self.starts += started
        await self.journal.append(entries)


class Gated:
    """Sets ``started`` when called, waits for ``go``, then streams ``chunks`` (and fails if ``fail``)."""

    def __init__(self, started: anyio.Event, go: anyio.Event, chunks: Sequence[str], *, fail: bool = False) -> None:
        self.started, self.go, self.chunks, self.fail = started, go, list(chunks), fail
        self.calls = 0

    @property
    def name(self) -> str:
        return "test:breaking"  # the same model as Breaking's: the same request digest

    async def request(self, request: ModelRequest) -> ModelResponse:
        raise NotImplementedError

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        self.calls += 1
        self.started.set()
        await self.go.wait()
        for c in self.chunks:
            yield ModelTextDelta(c)
        if self.fail:
            raise ModelError("connection dropped", severity="retriable")
        yield ModelResponse((TextPart("".join(self.chunks)),), USAGE, "end", "test")


def desk(journal: Journal, model: object) -> Agent:
    billing = Agent("Billing.", name="billing", model=model)  # type: ignore[arg-type]
    router = Router(
        [RouterRoute("billing", billing)],
        classifier=StaticClassifier("billing", 0.9),
        recovery=Recovery(sleep=RecordedSleeps()),
    )
    return Agent("Desk", name="desk", runtime=JournalRuntime(journal), architecture=router)


def clerk(journal: Journal, model: object) -> Agent:
    return Agent("Billing.", name="billing", model=model, runtime=JournalRuntime(journal))  # type: ignore[arg-type]


async def crash_at_start(agent: Agent, prompt: str) -> None:
    """Start a run and drop it at its first event (a process dying before any step)."""
    stream = agent.stream(prompt, session_id="s")
    async for _ in stream:
        break
    await stream.aclose()


@pytest.fixture(params=["sqlite", "memory", pytest.param("postgres", marks=pytest.mark.postgres)])
async def connect(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Callable[[], Journal]]:
    """Opens a connection to one journal, as each process would (the in-memory journal: itself)."""
    if request.param == "memory":
        shared = MemoryJournal()
        yield lambda: shared
        return
    opened: list[Journal] = []
    url, table = "", f"jeeves_test_{uuid.uuid4().hex[:12]}"
    if request.param == "postgres":
        url = request.getfixturevalue("pg_url")

    def new() -> Journal:
        j: Journal = SQLiteJournal(tmp_path / "j.db") if not url else PostgresJournal(url, table=table)
        opened.append(j)
        return j

    yield new
    for j in opened:
        await j.aclose()
    if url:
        async with PostgresJournal(url, table=table) as j:
            await j._query(f"DROP TABLE IF EXISTS {table}", [])


@pytest.mark.anyio
async def test_a_run_resumed_twice_at_once_and_replayed_gives_the_last_finished_result(
    connect: Callable[[], Journal],
) -> None:
    journal = connect()
    await crash_at_start(desk(journal, Breaking([])), "charged twice")
    meet, a_called, b_called, a_done = Meet(2), anyio.Event(), anyio.Event(), anyio.Event()
    results: dict[str, object] = {}

    async def process_a() -> None:  # its model breaks after text, once B's model is called: the run ends critical
        model = Gated(a_called, b_called, ["Refund ", "iss"], fail=True)
        results["A"] = await desk(HeldStart(connect(), meet), model).resume("s")
        a_done.set()

    async def process_b() -> None:  # its model answers, after A has finished
        model = Gated(b_called, a_done, ["Refund ", "issued."])
        results["B"] = await desk(HeldStart(connect(), meet), model).resume("s")

    async with anyio.create_task_group() as tg:
        tg.start_soon(process_a)
        tg.start_soon(process_b)
    a, b = results["A"], results["B"]
    assert a.status == "critical"  # type: ignore[attr-defined]
    assert (b.status, b.output) == ("ok", "Refund issued.")  # type: ignore[attr-defined]
    fresh = Breaking([])  # a third process replays the completed run: no model call
    replayed = await desk(connect(), fresh).resume("s")
    assert fresh.calls == 0
    assert (replayed.status, replayed.output) == ("ok", "Refund issued.")  # B finished last
    starts = [e.record.attempt for e in await journal.read("s", types=("run.start",))]  # type: ignore[union-attr]
    assert max(starts) == 4  # the two resumes were given attempts 2 and 3, the replay 4


@pytest.mark.anyio
async def test_a_run_resumed_twice_at_once_records_one_stream_per_attempt(connect: Callable[[], Journal]) -> None:
    journal = connect()
    await crash_at_start(clerk(journal, ScriptedModel([])), "charged twice")
    meet = Meet(2)
    agents = [clerk(HeldStart(connect(), meet), ScriptedModel(["Refund issued."])) for _ in range(2)]
    async with anyio.create_task_group() as tg:
        for agent in agents:
            tg.start_soon(agent.resume, "s")
    replayed = await recorded_events(journal, "s")  # what `jeeves-router replay` shows
    assert [e.kind for e in replayed] == ["run.started", "text.delta", "run.completed"]
    runs = await read_runs(journal, "s")
    assert runs.attempts == {runs.first.popitem()[0]: 3}


class Rival(Wrapped):
    """A journal where another process always writes its ``run.start`` of the same attempt just before ours."""

    def __init__(self, journal: Journal) -> None:
        super().__init__(journal)
        self.rivals = 0

    async def append(self, entries: Sequence[Entry]) -> None:
        for e in entries:
            if isinstance(e.record, RunStartRecord) and e.record.claim:
                self.rivals += 1
                rival = e.record.model_copy(update={"claim": f"rival-{self.rivals}"})
                await self.journal.append([e.model_copy(update={"record": rival})])
        await self.journal.append(entries)


@pytest.mark.anyio
async def test_a_resume_that_keeps_losing_its_attempt_raises_without_calling_the_model(tmp_path: Path) -> None:
    journal = SQLiteJournal(tmp_path / "j.db")
    await crash_at_start(clerk(journal, ScriptedModel([])), "charged twice")
    model = ScriptedModel(["Refund issued."])
    rival = Rival(SQLiteJournal(tmp_path / "j.db"))
    with pytest.raises(ResumeConflict) as caught:
        await clerk(rival, model).resume("s")
    assert model.requests == []
    message = str(caught.value)
    run_id = (await journal.read("s"))[0].run_id
    assert "'s'" in message and run_id in message and "another process" in message
    assert caught.value.metadata == {"session_id": "s", "run_id": run_id}
    assert rival.rivals > 1  # it tried the next attempt before giving up
    ends = await journal.read("s", types=("run.end",))
    assert [e.record.status for e in ends] == ["cut"]  # type: ignore[union-attr]  # only the crash's: nothing ran since
    later = await clerk(SQLiteJournal(tmp_path / "j.db"), ScriptedModel(["Refund issued."])).resume("s")
    assert later.output == "Refund issued."


# -- the attempt that tells how a run went ----------------------------------------------------


class HeldEnd(Wrapped):
    """A journal whose ``run.end`` append sets ``ending``, then waits for ``go`` (a process slow to record its end)."""

    def __init__(self, journal: Journal, ending: anyio.Event, go: anyio.Event) -> None:
        super().__init__(journal)
        self.ending, self.go = ending, go

    async def append(self, entries: Sequence[Entry]) -> None:
        if any(isinstance(e.record, RunEndRecord) for e in entries):
            self.ending.set()
            await self.go.wait()
        await self.journal.append(entries)


@pytest.mark.anyio
async def test_a_completed_run_reads_back_completed_when_a_concurrent_resume_of_it_failed_after(
    connect: Callable[[], Journal],
) -> None:
    # Process A resumes the run and is inside its tool call when process B resumes it too:
    # B may not repeat the call (its outcome is unknown to B), so B's attempt fails, and
    # records that after A's attempt completed. The run completed: every reader says so.
    calls: list[str] = []
    in_tool, release = anyio.Event(), anyio.Event()

    def refunds(journal: Journal, model: ScriptedModel | None = None) -> Agent:
        @tool
        async def refund(invoice: str) -> str:
            """Refund an invoice."""
            calls.append(invoice)
            in_tool.set()
            await release.wait()
            return f"refunded {invoice}"

        model = model or ScriptedModel([Call("refund", {"invoice": "INV-7"}), "Refunded INV-7."])
        return Agent("Billing.", name="billing", model=model, tools=[refund], runtime=JournalRuntime(journal))

    journal = connect()
    await crash_at_start(refunds(journal), "refund INV-7")
    results: dict[str, object] = {}
    a_done, b_ending = anyio.Event(), anyio.Event()

    async def process_a() -> None:
        results["A"] = await refunds(connect()).resume("s")
        a_done.set()

    async def process_b() -> None:
        with pytest.raises(ToolOutcomeUnknown, match="before a crash, or in another process still running it"):
            await refunds(HeldEnd(connect(), b_ending, a_done)).resume("s")  # A may be making it: not "a crash"

    async with anyio.create_task_group() as tg:
        tg.start_soon(process_a)
        await in_tool.wait()
        tg.start_soon(process_b)
        await b_ending.wait()  # B failed on the call A is making, and is about to record it
        release.set()
    assert calls == ["INV-7"]  # the refund was made once
    a = results["A"]
    assert (a.status, a.output) == ("ok", "Refunded INV-7.")  # type: ignore[attr-defined]
    ends = [(e.record.attempt, e.record.status) for e in await journal.read("s", types=("run.end",))]  # type: ignore[union-attr]
    assert ends == [(1, "cut"), (2, "completed"), (3, "failed")]
    replayed = await recorded_events(journal, "s")  # what `jeeves-router replay` shows
    assert [e.kind for e in replayed] == ["run.started", "tool.called", "tool.result", "text.delta", "run.completed"]
    turns = await session_turns(journal, "s")  # what the server's session listing and history read
    assert [(t.status, t.output) for t in turns] == [("ok", "Refunded INV-7.")]
    trace = await load_trace(journal, "s")  # what `jeeves-router trace` draws
    assert [(r.attempt, r.status) for r in trace.runs] == [(2, "ok")]
    fresh = ScriptedModel([])  # and resume replays that attempt: no model or tool call
    again = await refunds(connect(), fresh).resume("s")
    assert (again.status, again.output) == ("ok", "Refunded INV-7.") and fresh.requests == [] and calls == ["INV-7"]
