"""PostgresJournal: sessions shared by several processes through one PostgreSQL table.

Needs a server: ``eval "$(scripts/postgres.sh)"`` exports ``JEEVES_PG_URL``. Without it these
tests skip (and fail in CI, which must run them).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import anyio
import httpx2 as httpx
import pytest

from jeeves_router import Agent
from jeeves_router.journal import JournalError, JournalRuntime, PostgresJournal, SessionHistory, recorded_events
from jeeves_router.journal.records import Entry, RunEndRecord
from jeeves_router.models.base import ModelRequest
from jeeves_router.serve import create_app
from jeeves_router.testing import FunctionModel, ScriptedModel
from tests.serve_apps import build_desk, running
from tests.task_helpers import warnings_of_this_test

pytestmark = pytest.mark.postgres


@pytest.fixture
def table() -> str:
    return f"jeeves_test_{uuid.uuid4().hex[:12]}"


@pytest.fixture
async def journal(pg_url: str, table: str) -> AsyncIterator[PostgresJournal]:
    j = PostgresJournal(pg_url, table=table)
    yield j
    await j.aclose()
    await drop(pg_url, table)


def echo(journal: PostgresJournal) -> Agent:
    def answer(request: ModelRequest) -> str:
        return f"{request.messages[-1].text}|{len(request.messages) - 1}"

    return Agent(
        "echo",
        name="echo",
        model=FunctionModel(answer),
        runtime=JournalRuntime(journal, session_history=SessionHistory()),
    )


@pytest.mark.anyio
async def test_entries_round_trip_in_order(journal: PostgresJournal) -> None:
    entries = [
        Entry(session_id="a", run_id="r1", record=RunEndRecord(attempt=1, status="completed")),
        Entry(session_id="b", run_id="r2", record=RunEndRecord(attempt=1, status="failed", error_type="X")),
        Entry(session_id="a", run_id="r3", record=RunEndRecord(attempt=2, status="completed")),
    ]
    await journal.append(entries)
    got = await journal.read("a")
    assert [(e.run_id, e.record) for e in got] == [(e.run_id, e.record) for e in entries if e.session_id == "a"]
    assert got[0].seq is not None and got[1].seq is not None and got[0].seq < got[1].seq
    assert [e.run_id for e in await journal.read("a", run_id="r3")] == ["r3"]
    assert await journal.read("a", types=("step",)) == []
    assert await journal.sessions() == ["a", "b"]


@pytest.mark.anyio
async def test_many_journals_creating_one_new_table_at_once_all_open(pg_url: str, table: str) -> None:
    # Concurrent CREATE TABLE IF NOT EXISTS collides in PostgreSQL's catalog (UniqueViolation)
    # unless the creators take turns: every process starting on a fresh database meets this.
    journals = [PostgresJournal(pg_url, table=table) for _ in range(8)]
    failures: list[JournalError] = []

    async def first_use(j: PostgresJournal) -> None:
        try:
            assert await j.sessions() == []
        except JournalError as exc:
            failures.append(exc)

    try:
        async with anyio.create_task_group() as tg:
            for j in journals:
                tg.start_soon(first_use, j)
        assert failures == []
    finally:
        for j in journals:
            await j.aclose()
        await drop(pg_url, table)


@pytest.mark.anyio
async def test_two_processes_share_a_session(pg_url: str, journal: PostgresJournal) -> None:
    first = echo(journal)
    assert (await first.run("hello", session_id="s")).output == "hello|0"
    other = PostgresJournal(pg_url, table=journal.table)  # another machine, its own connection
    try:
        assert (await echo(other).run("again", session_id="s")).output == "again|2"
    finally:
        await other.aclose()
    assert (await first.run("third", session_id="s")).output == "third|4"


def test_a_server_keeps_its_sessions_in_postgres(pg_url: str, table: str) -> None:
    with running(create_app(build_desk(), journal=PostgresJournal(pg_url, table=table))) as server:
        for text, seen in (("refund please", 0), ("and the invoice?", 2)):
            body = {"model": "desk", "messages": [{"role": "user", "content": text}], "session_id": "pg-1"}
            reply = httpx.post(server.url + "/v1/chat/completions", json=body).json()
            assert reply["choices"][0]["message"]["content"].endswith(f"(I see {seen} earlier messages).")
        turns = httpx.get(server.url + "/v1/sessions/pg-1").json()["turns"]
    assert [(t["prompt"], t["route"]) for t in turns] == [("refund please", "billing"), ("and the invoice?", "billing")]
    anyio.run(drop, pg_url, table)


async def drop(pg_url: str, table: str) -> None:
    async with PostgresJournal(pg_url, table=table) as j:
        await j._query(f"DROP TABLE IF EXISTS {table}", [])


@pytest.mark.anyio
async def test_an_unreachable_server_is_a_journal_error_without_the_url() -> None:
    j = PostgresJournal("postgresql://nobody:hunter2@127.0.0.1:1/none?connect_timeout=2")
    with pytest.raises(JournalError) as info:
        await j.read("s")
    assert "hunter2" not in str(info.value) and "cannot connect" in str(info.value)
    with pytest.raises(JournalError, match="lower-case"):
        PostgresJournal("postgresql://x", table="Bad-Name")


def named(pg_url: str, name: str) -> str:
    """``pg_url`` for a connection the server shows as ``name`` (``pg_stat_activity.application_name``)."""
    return f"{pg_url}{'&' if '?' in pg_url else '?'}application_name={name}"


async def waiting_on_a_lock(admin: PostgresJournal, name: str) -> bool:
    rows = await admin._query(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s AND wait_event_type = 'Lock'", [name]
    )
    return bool(rows[0][0])


@pytest.mark.anyio
async def test_a_resume_whose_start_commits_late_still_loses_the_attempt_to_the_first_written(
    pg_url: str, journal: PostgresJournal, table: str
) -> None:
    """``seq`` values are taken at insert; a transaction may commit after a later one.

    Process A's ``run.start`` gets the lower ``seq`` but is held before its commit (a trigger
    waits on a lock the test holds); process B writes its own, reads the run back and must
    not conclude it was first: A's entry will be, once committed. Each resume must end up
    with an attempt of its own.
    """

    def clerk(j: PostgresJournal) -> Agent:
        return Agent("Billing.", name="billing", model=ScriptedModel(["Refund issued."]), runtime=JournalRuntime(j))

    stream = clerk(journal).stream("charged twice", session_id="s")  # a run that crashed at its start
    async for _ in stream:
        break
    await stream.aclose()
    slow, fast = f"slow_{table}", f"fast_{table}"
    await journal._query(
        f"CREATE FUNCTION {table}_hold() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        f"IF NEW.type = 'run.start' AND current_setting('application_name') = '{slow}' THEN "
        "PERFORM pg_advisory_xact_lock_shared(4242, 1); END IF; RETURN NEW; END $$",
        [],
    )
    await journal._query(
        f"CREATE TRIGGER {table}_hold AFTER INSERT ON {table} FOR EACH ROW EXECUTE FUNCTION {table}_hold()", []
    )
    a_journal = PostgresJournal(named(pg_url, slow), table=table)
    b_journal = PostgresJournal(named(pg_url, fast), table=table)
    for j in (a_journal, b_journal):
        await j.read("s")  # connected and the table set up: only their appends can wait
    b_done = anyio.Event()

    async def process_b() -> None:
        await clerk(b_journal).resume("s")
        b_done.set()

    await journal._query("SELECT pg_advisory_lock(4242, 1)", [])  # A's run.start commits once this is released
    try:
        async with anyio.create_task_group() as tg:
            try:
                tg.start_soon(clerk(a_journal).resume, "s")
                while not await waiting_on_a_lock(journal, slow):  # noqa: ASYNC110 (A: inserted, not committed)
                    await anyio.sleep(0.01)
                tg.start_soon(process_b)  # B writes its run.start after A's, and reads the run back
                while not (b_done.is_set() or await waiting_on_a_lock(journal, fast)):  # noqa: ASYNC110
                    await anyio.sleep(0.01)
            finally:
                await journal._query("SELECT pg_advisory_unlock(4242, 1)", [])
    finally:
        await a_journal.aclose()
        await b_journal.aclose()
        await journal._query(f"DROP FUNCTION {table}_hold() CASCADE", [])
    ends = await journal.read("s", types=("run.end",))
    assert sorted(e.record.attempt for e in ends) == [1, 2, 3]  # type: ignore[union-attr]  # 1: cut by aclose()
    assert [e.record.status for e in ends if e.record.attempt == 1] == ["cut"]  # type: ignore[union-attr]
    replayed = await recorded_events(journal, "s")
    assert [e.kind for e in replayed] == ["run.started", "text.delta", "run.completed"]


@pytest.mark.anyio
async def test_a_failed_table_setup_closes_its_connection(pg_url: str, table: str) -> None:
    import gc

    import psycopg

    async with await psycopg.AsyncConnection.connect(pg_url, autocommit=True) as admin:
        await admin.execute(f"CREATE VIEW {table} AS SELECT 1 AS x")  # the table's index cannot be made on a view
        try:
            with warnings_of_this_test() as caught:
                with pytest.raises(JournalError, match="cannot connect or create the table"):
                    await PostgresJournal(pg_url, table=table).sessions()
                gc.collect()  # an unclosed connection warns when it is collected
            assert [w for w in caught if issubclass(w.category, ResourceWarning)] == []
        finally:
            await admin.execute(f"DROP VIEW IF EXISTS {table}")
