"""``jeeves-router replay JOURNAL --session S`` prints a session's recorded event stream."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import anyio
from typer.testing import CliRunner

from jeeves_router.cli import app

GOLDEN = Path(__file__).parent / "fixtures" / "journals" / "v1" / "desk.db"


def _copy(tmp_path: Path) -> Path:
    shutil.copy(GOLDEN, tmp_path / "desk.db")
    return tmp_path / "desk.db"


def test_replay_prints_the_recorded_events_in_order(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["replay", str(_copy(tmp_path)), "--session", "golden-1"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    kinds = [line.split()[0] for line in lines]
    assert kinds[:3] == ["run.started", "router.classified", "router.dispatched"]
    assert kinds.count("run.started") == 4  # two turns, each with its specialist
    assert "'a refund is on its way.'" in result.output
    assert "tool.result" in kinds and "INV-42: two payments" in result.output


def test_replay_json_lines_are_valid_events(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["replay", str(_copy(tmp_path)), "-s", "golden-1", "--json"])
    assert result.exit_code == 0, result.output
    events = [json.loads(line) for line in result.output.splitlines()]
    assert events[0]["kind"] == "run.started" and events[-1]["kind"] == "run.completed"
    assert events[-1]["result"]["route"] == "general"


def test_replay_reports_a_missing_file_or_session(tmp_path: Path) -> None:
    missing = CliRunner().invoke(app, ["replay", str(tmp_path / "nope.db"), "--session", "x"])
    assert missing.exit_code == 2 and "does not exist" in missing.output
    assert not (tmp_path / "nope.db").exists()
    unknown = CliRunner().invoke(app, ["replay", str(_copy(tmp_path)), "--session", "no-such-session"])
    assert unknown.exit_code == 2 and "no recorded events" in unknown.output


def test_an_unknown_session_is_one_line_naming_the_sessions_to_give_instead(tmp_path: Path) -> None:
    """Its route's child sessions (``golden-1__route_billing``) are not offered: the parent is the one to give."""
    journal = _copy(tmp_path)
    for command, what in (["replay"], "recorded events"), (["trace", "-o", str(tmp_path / "t.html")], "recorded run"):
        result = CliRunner().invoke(app, [*command, str(journal), "--session", "no-such-session"])
        assert (result.exit_code, result.output) == (
            2,
            f"error: session 'no-such-session' has no {what} in {journal}; give one it has with --session: "
            "'golden-1'\n",
        )
    empty = tmp_path / "empty.db"
    anyio.run(_create, empty)
    result = CliRunner().invoke(app, ["replay", str(empty), "--session", "s"])
    assert result.output == f"error: session 's' has no recorded events in {empty}, which has no sessions\n"


async def _create(path: Path) -> None:
    """A journal with its tables and no entries."""
    from jeeves_router.journal.sqlite import SQLiteJournal

    journal = SQLiteJournal(path)
    await journal.sessions()
    await journal.aclose()


def test_replay_and_trace_leave_a_file_that_is_no_journal_unchanged(tmp_path: Path) -> None:
    """An empty file, or another application's SQLite database, is refused, not given a journal's tables."""
    import sqlite3

    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    other = tmp_path / "app.db"
    conn = sqlite3.connect(other)
    conn.execute("CREATE TABLE users (name TEXT)")
    conn.commit()
    conn.close()
    before = other.read_bytes()
    for path in (empty, other):
        for args in (["replay", str(path), "-s", "x"], ["trace", str(path), "-s", "x", "-o", str(tmp_path / "t.html")]):
            result = CliRunner().invoke(app, args)
            assert result.exit_code == 2, result.output
            assert result.output == (
                f"error: journal {path} is not a jeeves-router journal (no journal tables in it): "
                "give the file a JournalRuntime(SQLiteJournal(path)) wrote\n"
            )
    assert empty.read_bytes() == b"" and other.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db", "empty.db"]  # no -wal, no page written


def test_trace_into_a_missing_folder_is_one_error_line(tmp_path: Path) -> None:
    out = tmp_path / "nope" / "t.html"
    result = CliRunner().invoke(app, ["trace", str(_copy(tmp_path)), "-s", "golden-1", "-o", str(out)])
    assert result.exit_code == 2, result.output
    assert result.output == f"error: --out {out}: the folder {out.parent} does not exist\n"


def _other_app_database(path: Path) -> bytes:
    import sqlite3

    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE users (name TEXT)")
    conn.execute("INSERT INTO users VALUES ('ada')")
    conn.commit()
    conn.close()
    return path.read_bytes()


def test_serve_and_mcp_refuse_another_application_database_as_journal(tmp_path: Path) -> None:
    """``--journal app.db`` of another application: one error line at start, the file left byte-identical."""
    other = tmp_path / "app.db"
    before = _other_app_database(other)
    text = tmp_path / "notes.txt"
    text.write_text("not a database\n")
    fix = "give a new or empty file for the journal"
    for path, says in (
        (
            other,
            "is not a jeeves-router journal: it is another database (tables users), which would get the "
            f"journal's tables; {fix}",
        ),
        (text, f"is not a jeeves-router journal (not an SQLite database): {fix}"),
    ):
        for command in (["serve"], ["mcp", "--transport", "http"]):
            result = CliRunner().invoke(app, [*command, "tests.serve_apps:slow_desk", "--journal", str(path)])
            assert result.exit_code == 2, result.output
            assert result.output == f"error: journal {path} {says}\n"
    assert other.read_bytes() == before and text.read_text() == "not a database\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db", "notes.txt"]  # no -wal, no -shm


def test_a_journal_refuses_to_write_into_another_application_database(tmp_path: Path) -> None:
    """From Python too: SQLiteJournal(path) on another database raises at first use, writing nothing."""
    import anyio
    import pytest

    from jeeves_router.journal.records import JournalError
    from jeeves_router.journal.sqlite import SQLiteJournal
    from jeeves_router.serve import create_app
    from jeeves_router.testing import FunctionModel
    from tests.serve_apps import desk_with

    other = tmp_path / "app.db"
    before = _other_app_database(other)
    with pytest.raises(JournalError, match=r"app\.db is not a jeeves-router journal: it is another database"):
        anyio.run(SQLiteJournal(other).read, "s")
    assert other.read_bytes() == before
    empty, journal = tmp_path / "empty.db", _copy(tmp_path)
    empty.write_bytes(b"")
    for path in (empty, journal, tmp_path / "new.db"):  # still taken: an empty file, a journal, a new file
        create_app(desk_with(FunctionModel(lambda r: "ok")), journal=str(path))
        anyio.run(SQLiteJournal(path).read, "s")
    assert (tmp_path / "new.db").exists()
