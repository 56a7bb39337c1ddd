"""Which file a SQLite journal takes: one rule for writers (``serve --journal``) and readers (``replay``).

A file is a journal when its ``entries`` table has the journal's columns; table names alone
mark nothing (another application's database may have a ``meta`` table of its own). A path
in a missing folder is refused, the folder not created (a typo in a path must not make
folders).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio
import pytest
from typer.testing import CliRunner

from jeeves_router.cli import app
from jeeves_router.journal import JournalCorrupt, JournalError, SQLiteJournal
from jeeves_router.journal.records import Entry, RunEndRecord

WRITE_FIX = "give a new or empty file for the journal"
READ_FIX = "give the file a JournalRuntime(SQLiteJournal(path)) wrote"


def _database(path: Path, *statements: str) -> bytes:
    conn = sqlite3.connect(path)
    for statement in statements:
        conn.execute(statement)
    conn.commit()
    conn.close()
    return path.read_bytes()


def _settings_store(path: Path) -> bytes:
    """Another application's database whose one table is named ``meta``, as the journal's is."""
    return _database(
        path,
        "CREATE TABLE meta (name TEXT PRIMARY KEY, setting TEXT)",
        "INSERT INTO meta VALUES ('theme', 'dark')",
    )


def _blog(path: Path) -> bytes:
    """Another application's database with tables named ``meta`` and ``entries``, not the journal's."""
    return _database(
        path,
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
        "CREATE TABLE entries (id INTEGER PRIMARY KEY, title TEXT, body TEXT)",
        "INSERT INTO entries VALUES (1, 'hello', 'first post')",
    )


@pytest.mark.parametrize(("make", "tables"), [(_settings_store, "meta"), (_blog, "entries, meta")])
def test_another_database_with_a_journal_table_name_is_refused_and_left_unchanged(
    tmp_path: Path, make: object, tables: str
) -> None:
    path = tmp_path / "app.db"
    before = make(path)  # type: ignore[operator]
    says = f"journal {path} is not a jeeves-router journal: it is another database (tables {tables}), "
    with pytest.raises(JournalError, match=r"app\.db is not a jeeves-router journal: it is another database"):
        anyio.run(SQLiteJournal(path).read, "s")
    for command in (["serve"], ["mcp", "--transport", "http"]):
        result = CliRunner().invoke(app, [*command, "tests.serve_apps:slow_desk", "--journal", str(path)])
        assert result.exit_code == 2, result.output
        assert result.output == f"error: {says}which would get the journal's tables; {WRITE_FIX}\n"
    result = CliRunner().invoke(app, ["replay", str(path), "-s", "x"])
    assert result.exit_code == 2, result.output
    assert (
        result.output == f"error: journal {path} is not a jeeves-router journal (no journal tables in it): {READ_FIX}\n"
    )
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]  # no -wal, no -shm


def test_a_reader_given_a_file_that_is_no_database_says_so_in_the_writers_words(tmp_path: Path) -> None:
    """``replay`` of a text file: the rule a writer applies, not "damaged journal" (JournalCorrupt)."""
    text = tmp_path / "notes.txt"
    text.write_text("not a database\n")
    with pytest.raises(JournalError) as raised:
        anyio.run(SQLiteJournal(text, create=False).read, "s")
    assert not isinstance(raised.value, JournalCorrupt)
    assert str(raised.value) == f"journal {text} is not a jeeves-router journal (not an SQLite database): {READ_FIX}"
    assert text.read_text() == "not a database\n"


def test_a_journal_in_a_missing_folder_is_refused_and_no_folder_is_made(tmp_path: Path) -> None:
    path = tmp_path / "typo" / "deeper" / "runs.db"
    folder = path.parent
    says = (
        f"journal {path} cannot be created: the folder {folder} does not exist; "
        f"create it first (mkdir -p {folder}) or give another path"
    )
    with pytest.raises(JournalError) as raised:
        anyio.run(SQLiteJournal(path).read, "s")
    assert str(raised.value) == says
    for command in (["serve"], ["mcp", "--transport", "http"]):
        result = CliRunner().invoke(app, [*command, "tests.serve_apps:slow_desk", "--journal", str(path)])
        assert result.exit_code == 2, result.output
        assert result.output == f"error: {says}\n"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.anyio
async def test_a_new_journal_is_taken_by_a_reader_and_its_folder_may_be_made_first(tmp_path: Path) -> None:
    path = tmp_path / "made" / "runs.db"
    path.parent.mkdir()
    entry = Entry(session_id="s", run_id="r", record=RunEndRecord(attempt=1, status="completed"))
    async with SQLiteJournal(path) as writer:
        await writer.append([entry])
    async with SQLiteJournal(path, create=False) as reader:
        assert [e.record for e in await reader.read("s")] == [entry.record]
    with sqlite3.connect(path) as conn:  # the tables and the version come in one transaction
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ("2",)


@pytest.mark.anyio
async def test_a_journal_an_older_release_is_creating_is_taken_by_a_writer(tmp_path: Path) -> None:
    """An older release made ``meta`` (empty) before ``entries``: a writer meeting that half takes the file."""
    path = tmp_path / "runs.db"
    _database(path, "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    entry = Entry(session_id="s", run_id="r", record=RunEndRecord(attempt=1, status="completed"))
    async with SQLiteJournal(path) as writer:
        await writer.append([entry])
        assert [e.record for e in await writer.read("s")] == [entry.record]


def test_a_folder_given_as_the_served_journal_is_refused_at_start(tmp_path: Path) -> None:
    """It was taken, and then every request failed (500, JournalError) until the server was restarted."""
    from jeeves_router.errors import UsageError
    from jeeves_router.serve import create_app
    from jeeves_router.testing import FunctionModel
    from tests.serve_apps import desk_with

    says = f"journal {tmp_path} is not a file (a folder?): give the path of a journal file"
    with pytest.raises(UsageError) as raised:
        create_app(desk_with(FunctionModel(lambda r: "ok")), journal=str(tmp_path))
    assert str(raised.value) == says
    assert list(tmp_path.iterdir()) == []


def test_a_path_under_an_unexpanded_tilde_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--journal=~/runs.db`` reaches the program as it is (no shell expands a ``~`` after ``=``)."""
    monkeypatch.chdir(tmp_path)
    says = (
        "journal ~/runs.db cannot be created: the folder ~ does not exist (a leading ~ is not expanded "
        "here: give the full path, e.g. os.path.expanduser)"
    )
    with pytest.raises(JournalError) as raised:
        anyio.run(SQLiteJournal("~/runs.db").read, "s")
    assert str(raised.value) == says
    result = CliRunner().invoke(app, ["serve", "tests.serve_apps:slow_desk", "--journal=~/runs.db"])
    assert (result.exit_code, result.output) == (2, f"error: {says}\n")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.anyio
async def test_a_journal_without_its_meta_table_gets_it_back_when_opened(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    entry = Entry(session_id="s", run_id="r", record=RunEndRecord(attempt=1, status="completed"))
    async with SQLiteJournal(path) as writer:
        await writer.append([entry])
    _database(path, "DROP TABLE meta")
    async with SQLiteJournal(path) as reopened:
        assert [e.record for e in await reopened.read("s")] == [entry.record]
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ("2",)
