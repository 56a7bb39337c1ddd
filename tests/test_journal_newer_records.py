"""A record a newer release wrote — a record type or a schema version this release does not know.

Servers sharing one journal are upgraded one at a time, so an older reader may meet such a
record. It used to be reported as damage (``JournalCorrupt``: "does not match any of the
expected tags"), and a read of some record types (``replay``, a resumed step) skipped it
silently. Now every read that meets one raises :class:`JournalError` saying a newer
jeeves-router wrote it: upgrade. None is skipped, since any may decide how a run went
(a newer release's ``tool.cancelled`` tells a resume not to call the tool). Data that is not an
entry at all stays ``JournalCorrupt``.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import anyio
import pytest

from jeeves_router import Agent, tool
from jeeves_router.journal import (
    JournalCorrupt,
    JournalError,
    JournalRuntime,
    PostgresJournal,
    SQLiteJournal,
    recorded_events,
    session_turns,
)
from jeeves_router.journal.records import Entry
from jeeves_router.testing import Call, Reply, ScriptedModel

Store = SQLiteJournal | PostgresJournal


@tool
def refund(invoice: str) -> str:
    """Refund an invoice."""
    return f"{invoice}: refunded"


def desk(journal: Store, model: ScriptedModel) -> Agent:
    return Agent("Desk.", name="desk", model=model, tools=[refund], runtime=JournalRuntime(journal))


@pytest.fixture(params=["sqlite", "postgres"])
def journal(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "sqlite":
        yield SQLiteJournal(tmp_path / "j.db")
        return
    url: str = request.getfixturevalue("pg_url")
    table = f"jeeves_test_{uuid.uuid4().hex[:12]}"
    yield PostgresJournal(url, table=table)

    async def drop() -> None:
        async with PostgresJournal(url, table=table) as j:
            await j._query(f"DROP TABLE IF EXISTS {table}", [])

    anyio.run(drop)


async def store_raw(journal: Store, session: str, run: str, type_: str, body: str) -> int:
    """Store ``body`` as the next entry of ``run``, as the release that wrote it would (SQLite: chained checksum)."""
    if isinstance(journal, PostgresJournal):
        sql = f"INSERT INTO {journal.table} (session_id, run_id, type, body) VALUES (%s, %s, %s, %s) RETURNING seq"
        [(seq,)] = await journal._query(sql, [session, run, type_, body])
        return int(seq)
    await journal.aclose()
    with closing(journal._open()) as conn:
        head = "SELECT checksum FROM entries WHERE session_id = ? AND run_id = ? ORDER BY seq DESC LIMIT 1"
        prev = conn.execute(head, (session, run)).fetchone()[0]
        check = journal._checksum(prev, session, run, type_, body)
        cur = conn.execute(
            "INSERT INTO entries (session_id, run_id, type, body, checksum) VALUES (?, ?, ?, ?, ?)",
            (session, run, type_, body, check),
        )
        seq = cur.lastrowid
    journal._conn = None
    assert seq is not None
    return seq


async def recorded_run(journal: Store) -> tuple[Entry, str]:
    """One run of the desk that refunds INV-7, in session ``s``: its last entry and its output."""
    model = ScriptedModel([Reply(calls=[Call("refund", {"invoice": "INV-7"})]), "INV-7 is refunded."])
    result = await desk(journal, model).run("refund INV-7", session_id="s")
    assert result.output == "INV-7 is refunded."
    return (await journal.read("s"))[-1], result.output


def newer(entry: Entry, **changes: object) -> str:
    data = json.loads(entry.body())
    record = changes.pop("record", None)
    data.update(changes)
    if record is not None:
        data["record"] = record
    return json.dumps(data, separators=(",", ":"))


@pytest.mark.anyio
async def test_a_record_type_a_newer_release_wrote_is_an_upgrade_error_on_every_read(journal: Store) -> None:
    try:
        last, _ = await recorded_run(journal)
        body = newer(last, record={"type": "tool.cancelled", "name": "refund", "index": 1})
        seq = await store_raw(journal, "s", last.run_id, "tool.cancelled", body)
        says = (
            f"entry {seq} (session 's') was written by a newer jeeves-router: record type 'tool.cancelled', "
            "which this release does not know; upgrade jeeves-router to read this journal"
        )
        reads = {
            "read": lambda: journal.read("s"),
            "typed read": lambda: journal.read("s", types=("run.start", "run.end", "event")),
            "replay": lambda: recorded_events(journal, "s"),
            "sessions": lambda: session_turns(journal, "s"),
            "resume": lambda: desk(journal, ScriptedModel([])).resume("s"),
        }
        for name, read in reads.items():
            with pytest.raises(JournalError) as raised:
                await read()
            assert not isinstance(raised.value, JournalCorrupt), name
            assert str(raised.value).endswith(says), (name, str(raised.value))
    finally:
        await journal.aclose()


@pytest.mark.anyio
async def test_a_newer_schema_version_is_an_upgrade_error_even_when_its_record_does_not_parse(journal: Store) -> None:
    try:
        last, _ = await recorded_run(journal)
        body = newer(last, v=3, record={"type": "run.end", "attempt": "first", "outcome": "completed"})
        seq = await store_raw(journal, "s", last.run_id, "run.end", body)
        with pytest.raises(JournalError) as raised:
            await journal.read("s")
        assert not isinstance(raised.value, JournalCorrupt)
        assert str(raised.value).endswith(
            f"entry {seq} (session 's') was written by a newer jeeves-router: schema version 3, which this "
            "release does not know (it reads versions [1, 2]); upgrade jeeves-router to read this journal"
        )
    finally:
        await journal.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize(
    "record",
    [
        {"type": "run.end", "attempt": "first", "status": "completed"},  # a known type, a field gone wrong
        {"name": "refund", "index": 1},  # no type
        {"type": 7},
    ],
)
async def test_an_entry_of_a_known_version_that_does_not_parse_is_still_corrupt(
    journal: Store, record: dict[str, object]
) -> None:
    try:
        last, _ = await recorded_run(journal)
        seq = await store_raw(journal, "s", last.run_id, str(record.get("type", "")), newer(last, record=record))
        with pytest.raises(JournalCorrupt, match=rf"entry {seq} \(session 's'\) is not a valid entry"):
            await journal.read("s")
    finally:
        await journal.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("value", "error", "says"),
    [
        (
            "99",
            JournalError,
            "was written by a newer jeeves-router: schema version 99, which this release does not know "
            "(it reads versions [1, 2]); upgrade jeeves-router",
        ),
        ("two", JournalCorrupt, "has schema version 'two', which no release writes (a damaged file)"),
    ],
)
async def test_the_schema_version_of_a_sqlite_file_is_checked_in_the_same_words(
    tmp_path: Path, value: str, error: type[JournalError], says: str
) -> None:
    path = tmp_path / "j.db"
    async with SQLiteJournal(path) as journal:
        await recorded_run(journal)
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (value,))
    with pytest.raises(JournalError) as raised:
        await SQLiteJournal(path).read("s")
    assert type(raised.value) is error and str(raised.value) == f"journal {path} {says}"
