"""The SQLite journal: permissions, 100 concurrent sessions, damaged or tampered files."""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
from contextlib import closing
from pathlib import Path

import anyio
import pytest

from jeeves_router.journal import (
    JournalCorrupt,
    JournalError,
    JournalRuntime,
    SQLiteJournal,
    recorded_events,
)
from jeeves_router.journal.records import Entry, EventRecord
from jeeves_router.testing import ScriptedModel
from tests.journal_helpers import PROMPT, DeskModel, build_desk


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _record_one(path: Path, session: str = "s1") -> None:
    journal = SQLiteJournal(path)
    await build_desk(JournalRuntime(journal), DeskModel()).run(PROMPT, session_id=session)
    await journal.aclose()


@pytest.mark.anyio
async def test_journal_files_are_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "j.db"
    path.parent.mkdir()  # a journal's folder is not created for it
    journal = SQLiteJournal(path)
    await build_desk(JournalRuntime(journal), DeskModel()).run(PROMPT, session_id="s1")
    for f in (path, Path(f"{path}-wal")):
        assert stat.S_IMODE(os.stat(f).st_mode) == 0o600, f
    await journal.aclose()


@pytest.mark.anyio
async def test_one_hundred_concurrent_sessions_lose_and_mix_nothing(tmp_path: Path) -> None:
    journal = SQLiteJournal(tmp_path / "j.db")
    model = DeskModel()
    desk = build_desk(JournalRuntime(journal), model)
    outputs: dict[int, str | None] = {}

    async def one(i: int) -> None:
        outputs[i] = (await desk.run(f"charged twice for INV-{i}", session_id=f"s{i}")).output

    async with anyio.create_task_group() as tg:
        for i in range(100):
            tg.start_soon(one, i)
    assert outputs == {i: f"Refund issued: INV-{i} was paid twice." for i in range(100)}
    assert len(model.calls) == 300
    await journal.aclose()

    reopened = SQLiteJournal(tmp_path / "j.db")
    assert sorted(await reopened.sessions()) == sorted(
        [f"s{i}" for i in range(100)] + [f"s{i}__route_billing" for i in range(100)]
    )
    for i in (0, 37, 99):
        events = await recorded_events(reopened, f"s{i}")
        assert all(ev.session_id in (f"s{i}", f"s{i}__route_billing") for ev in events)
        assert [ev.kind for ev in events].count("text.delta") == 3
        child = await reopened.read(f"s{i}__route_billing")
        assert [e.record.type for e in child] == ["model", "tool.started", "step", "model"]
        assert child[2].record.result["content"] == f"INV-{i} was paid twice"  # type: ignore[union-attr]

    silent = ScriptedModel([], name="desk")
    replay = build_desk(JournalRuntime(reopened), silent)
    replayed: dict[int, str | None] = {}

    async def again(i: int) -> None:
        replayed[i] = (await replay.resume(f"s{i}")).output

    async with anyio.create_task_group() as tg:
        for i in range(100):
            tg.start_soon(again, i)
    assert replayed == outputs and silent.requests == []
    await reopened.aclose()


@pytest.mark.anyio
async def test_a_tampered_entry_is_reported_with_file_and_entry(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    await _record_one(path)
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        seq = conn.execute("SELECT seq FROM entries WHERE type = 'model' AND body LIKE '%Refund%'").fetchone()[0]
        conn.execute("UPDATE entries SET body = replace(body, 'Refund', 'Rebate') WHERE seq = ?", (seq,))
    journal = SQLiteJournal(path)
    with pytest.raises(JournalCorrupt) as info:
        await build_desk(JournalRuntime(journal), DeskModel()).resume("s1")
    assert str(path) in str(info.value) and f"entry {seq}" in str(info.value)
    await journal.aclose()


@pytest.mark.anyio
async def test_a_removed_entry_breaks_the_chain_of_its_run(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    await _record_one(path)
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        seq = conn.execute("SELECT MIN(seq) FROM entries WHERE type = 'step' AND session_id = 's1'").fetchone()[0]
        conn.execute("DELETE FROM entries WHERE seq = ?", (seq,))
    with pytest.raises(JournalCorrupt, match=r"entry \d+ .*removed"):
        await recorded_events(SQLiteJournal(path), "s1")


@pytest.mark.anyio
async def test_an_entry_that_is_not_json_is_reported(tmp_path: Path) -> None:
    journal = SQLiteJournal(tmp_path / "j.db")
    await journal.append([Entry(session_id="s", run_id="r", record=EventRecord(attempt=1, event={"kind": "x"}))])
    await journal.aclose()
    # rewrite the body *and* its checksum, as a buggy writer would: the body check still catches it
    journal = SQLiteJournal(tmp_path / "j.db")
    bad = "{not json"
    check = journal._checksum("", "s", "r", "event", bad)
    with closing(sqlite3.connect(tmp_path / "j.db", isolation_level=None)) as conn:
        conn.execute("UPDATE entries SET body = ?, checksum = ?", (bad, check))
    with pytest.raises(JournalCorrupt, match=r"j\.db: entry 1 .*not a valid entry"):
        await journal.read("s")


@pytest.mark.anyio
async def test_a_truncated_file_is_reported_with_its_name(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    for i in range(30):
        await _record_one(path, f"s{i}")
    size = path.stat().st_size
    cut = tmp_path / "cut.db"
    shutil.copy(path, cut)
    os.truncate(cut, size // 3)
    with pytest.raises(JournalCorrupt, match=r"cut\.db.*entry \d+ .*cannot"):
        journal = SQLiteJournal(cut)
        for i in range(30):
            await journal.read(f"s{i}")


@pytest.mark.anyio
async def test_a_missing_file_is_not_created_when_create_is_false(tmp_path: Path) -> None:
    with pytest.raises(JournalError, match="does not exist"):
        await SQLiteJournal(tmp_path / "nope.db", create=False).read("s")
    assert not (tmp_path / "nope.db").exists()


@pytest.mark.anyio
async def test_a_newer_schema_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    await _record_one(path)
    with closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(JournalError, match="schema version 99"):
        await SQLiteJournal(path).read("s1")


@pytest.mark.anyio
async def test_no_credential_of_a_model_reaches_the_journal(tmp_path: Path) -> None:
    model = DeskModel()
    model.api_key = "sk-live-DO-NOT-STORE"  # type: ignore[attr-defined]
    model.headers = {"Authorization": "Bearer sk-live-DO-NOT-STORE"}  # type: ignore[attr-defined]
    journal = SQLiteJournal(tmp_path / "j.db")
    await build_desk(JournalRuntime(journal), model).run(PROMPT, session_id="s1")
    await journal.aclose()
    assert b"Refund issued" in (tmp_path / "j.db").read_bytes()  # the run is in the file...
    assert b"sk-live" not in (tmp_path / "j.db").read_bytes()  # ...the credential is not


def _lock_fresh_file(path: Path) -> sqlite3.Connection:
    """A fresh rollback-mode file with another connection's write transaction open.

    SQLite answers a switch to WAL on such a file with "database is locked" at once,
    without waiting on its busy timeout: two processes opening a new journal together.
    """
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")  # the journal's first table
    other.execute("BEGIN IMMEDIATE")
    return other


@pytest.mark.anyio
async def test_opening_waits_for_another_connection_that_holds_a_new_file(tmp_path: Path) -> None:
    from jeeves_router.journal import sqlite as sqlite_journal

    path = tmp_path / "j.db"
    other = _lock_fresh_file(path)
    journal = SQLiteJournal(path)
    real_open, refused = journal._open, []

    def open_then_release() -> sqlite3.Connection:
        try:
            return real_open()
        except sqlite_journal._Busy:  # the open met the lock: the other connection lets go only now
            if not refused:
                other.execute("COMMIT")
                other.close()
            refused.append(True)
            raise

    journal._open = open_then_release  # type: ignore[method-assign]
    await build_desk(JournalRuntime(journal), DeskModel()).run(PROMPT, session_id="s1")
    assert refused == [True]  # refused once while the lock was held, then opened
    assert [e.record.type for e in await journal.read("s1")][:1] == ["run.start"]
    await journal.aclose()


@pytest.mark.anyio
async def test_a_lock_held_past_the_timeout_is_an_error_that_says_locked_not_corrupt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jeeves_router.journal import sqlite as sqlite_journal

    monkeypatch.setattr(sqlite_journal, "_BUSY_TIMEOUT", 0.3)
    path = tmp_path / "j.db"
    other = _lock_fresh_file(path)
    try:
        with pytest.raises(JournalError, match=r"kept it locked for 0\.3 s") as caught:
            await SQLiteJournal(path).read("s1")
        assert not isinstance(caught.value, JournalCorrupt)
    finally:
        other.close()


@pytest.mark.anyio
async def test_a_reader_reads_while_another_process_holds_the_write_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # In WAL mode readers do not wait for a writer, and neither does opening an existing journal
    # (its schema's CREATE ... IF NOT EXISTS, with nothing to create, takes no write lock).
    from jeeves_router.journal import sqlite as sqlite_journal

    path = tmp_path / "j.db"
    async with SQLiteJournal(path) as journal:
        await build_desk(JournalRuntime(journal), DeskModel()).run(PROMPT, session_id="s1")
    monkeypatch.setattr(sqlite_journal, "_BUSY_TIMEOUT", 0.3)  # a reader that waited for the lock would fail
    writer = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    writer.execute("BEGIN IMMEDIATE")  # another process in the middle of an append
    try:
        async with SQLiteJournal(path, create=False) as reader:  # as `jeeves-router replay` opens it
            assert [e.record.type for e in await reader.read("s1")][:1] == ["run.start"]
            assert await reader.sessions() == ["s1", "s1__route_billing"]
    finally:
        writer.execute("ROLLBACK")
        writer.close()


@pytest.mark.anyio
async def test_a_locked_file_while_reading_or_listing_is_not_reported_as_damaged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = SQLiteJournal(tmp_path / "j.db")
    await journal.sessions()  # open it first: the lock then meets the read, not the open
    original = journal._open
    monkeypatch.setattr(journal, "_open", lambda: _Locked(original()))
    for call in (journal.sessions, lambda: journal.read("s1")):
        with pytest.raises(JournalError, match="database is locked") as caught:
            await call()
        assert not isinstance(caught.value, JournalCorrupt)
    monkeypatch.undo()
    await journal.aclose()


class _Locked:
    """A connection whose queries meet another process's lock (SQLITE_BUSY past the busy timeout)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def execute(self, *args: object) -> None:
        raise sqlite3.OperationalError("database is locked")


@pytest.mark.anyio
async def test_a_folder_or_a_path_under_a_file_is_a_clear_error_not_a_damaged_journal(tmp_path: Path) -> None:
    with pytest.raises(JournalError, match="is not a file") as folder:
        await SQLiteJournal(tmp_path).read("s1")
    (tmp_path / "plain").write_text("not a folder")
    with pytest.raises(JournalError, match="cannot be created") as under_file:
        await SQLiteJournal(tmp_path / "plain" / "j.db").read("s1")
    assert not isinstance(folder.value, JournalCorrupt) and not isinstance(under_file.value, JournalCorrupt)


@pytest.mark.anyio
async def test_closing_from_a_cancelled_task_still_closes_the_connection(tmp_path: Path) -> None:
    journal = SQLiteJournal(tmp_path / "j.db")
    conn = await journal._run(lambda c: c)  # opens the connection
    with anyio.CancelScope() as scope:
        scope.cancel()
        await journal.aclose()  # e.g. an ``async with`` block left by a cancellation
    # an open connection would leak (Python 3.13 warns when one is collected unclosed)
    with pytest.raises(sqlite3.ProgrammingError, match="closed database"):
        conn.execute("SELECT 1")


def test_close_closes_the_connection_without_an_event_loop_and_a_later_call_reopens(tmp_path: Path) -> None:
    journal = SQLiteJournal(tmp_path / "j.db")
    anyio.run(_record_one_in, journal)
    conn = anyio.run(journal._run, lambda c: c)  # the connection the runs used
    journal.close()  # synchronous: a plain script's end, a test fixture
    with pytest.raises(sqlite3.ProgrammingError, match="closed database"):
        conn.execute("SELECT 1")
    journal.close()  # closing twice is harmless
    assert anyio.run(journal.sessions)[0] == "s1"  # reopened
    journal.close()


async def _record_one_in(journal: SQLiteJournal) -> None:
    await build_desk(JournalRuntime(journal), DeskModel()).run(PROMPT, session_id="s1")
