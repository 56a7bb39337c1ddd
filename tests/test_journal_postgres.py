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
from jeeves_router.journal import JournalError, JournalRuntime, PostgresJournal, SessionHistory
from jeeves_router.journal.records import Entry, RunEndRecord
from jeeves_router.models.base import ModelRequest
from jeeves_router.serve import create_app
from jeeves_router.testing import FunctionModel
from tests.serve_apps import build_desk, running

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
