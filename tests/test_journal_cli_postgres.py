"""``replay`` and ``trace`` take the journals ``serve --journal`` takes: a SQLite file or a ``postgresql://`` URL.

They took a path only: a URL was read as a file name ("journal postgresql:/user:pw@host/db
does not exist"), its password shown in the error. Now a URL opens the PostgreSQL journal
(:func:`jeeves_router.journal.attach.open_journal`, the one that ``--journal`` uses), and its
errors never show the URL.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import anyio
import pytest
from typer.testing import CliRunner

from jeeves_router import Agent
from jeeves_router.cli import app
from jeeves_router.journal import JournalError, JournalRuntime, PostgresJournal
from jeeves_router.testing import ScriptedModel


def test_a_postgresql_url_is_a_journal_to_replay_and_its_password_is_never_shown(tmp_path: Path) -> None:
    url = "postgresql://desk:hunter2@127.0.0.1:1/jeeves"  # nothing listens on port 1
    out = tmp_path / "t.html"
    for args in (["replay", url, "-s", "s"], ["trace", url, "-s", "s", "-o", str(out)]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2, result.output
        assert "hunter2" not in result.output and result.output.count("\n") == 1
        assert result.output.startswith("error: PostgresJournal(table='jeeves_journal'): cannot connect"), result.output
    said = CliRunner().invoke(app, ["replay", url, "-s", "s", "--key-env", "HOME"])
    assert (said.exit_code, said.output) == (
        2,
        "error: --key-env: a PostgreSQL journal has no key (its entries carry no checksum); leave it out\n",
    )


def test_replay_and_trace_read_a_session_from_postgresql(pg_url: str, tmp_path: Path) -> None:
    """The table ``serve --journal postgresql://...`` writes (the default one); the session is the test's own."""
    session = f"s-{uuid.uuid4().hex[:12]}"

    async def record() -> None:
        async with PostgresJournal(pg_url) as journal:
            desk = Agent("Desk.", name="desk", model=ScriptedModel(["Refunded."]), runtime=JournalRuntime(journal))
            await desk.run("refund INV-1", session_id=session)

    async def forget() -> None:
        async with PostgresJournal(pg_url) as journal:
            await journal._query(f"DELETE FROM {journal.table} WHERE session_id = %s", [session])

    anyio.run(record)
    try:
        replay = CliRunner().invoke(app, ["replay", pg_url, "-s", session])
        assert replay.exit_code == 0, replay.output
        kinds = [line.split()[0] for line in replay.output.splitlines()]
        assert kinds == ["run.started", "text.delta", "run.completed"]
        out = tmp_path / "t.html"
        trace = CliRunner().invoke(app, ["trace", pg_url, "-s", session, "-o", str(out)])
        assert trace.exit_code == 0, trace.output
        assert "Refunded." in out.read_text(encoding="utf-8")
    finally:
        anyio.run(forget)


@contextmanager
def empty_database(pg_url: str) -> Iterator[str]:
    """The URL of a new database with no table at all (dropped afterwards): the wrong database to read."""
    import psycopg

    name = f"jeeves_empty_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield urlunsplit(urlsplit(pg_url)._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE {name} WITH (FORCE)")


def tables_in(url: str) -> list[str]:
    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        return [r[0] for r in rows.fetchall()]


def test_replay_and_trace_of_a_database_without_a_journal_create_nothing_there(pg_url: str, tmp_path: Path) -> None:
    """Reading the wrong database created an empty ``jeeves_journal`` table in it; a reader creates nothing."""
    with empty_database(pg_url) as url:
        name = urlsplit(url).path.lstrip("/")
        out = tmp_path / "t.html"
        for args in (["replay", url, "-s", "s"], ["trace", url, "-s", "s", "-o", str(out)]):
            result = CliRunner().invoke(app, args)
            assert (result.exit_code, result.output) == (
                2,
                f"error: PostgreSQL database {name!r} has no table 'jeeves_journal': it holds no jeeves-router "
                "journal; give the URL a JournalRuntime(PostgresJournal(url)) wrote\n",
            )
        assert tables_in(url) == []
        assert not out.exists()


def test_a_reading_postgres_journal_refuses_a_missing_table_and_a_writing_one_creates_it(pg_url: str) -> None:
    table = f"jeeves_test_{uuid.uuid4().hex[:12]}"

    async def read(journal: PostgresJournal) -> list[str]:
        async with journal:
            return await journal.sessions()

    with pytest.raises(JournalError, match=f"has no table '{table}'"):
        anyio.run(read, PostgresJournal(pg_url, table=table, create=False))
    assert table not in tables_in(pg_url)
    try:
        assert anyio.run(read, PostgresJournal(pg_url, table=table)) == []  # a writer creates it
        assert anyio.run(read, PostgresJournal(pg_url, table=table, create=False)) == []  # then it can be read
    finally:
        import psycopg

        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f"DROP TABLE IF EXISTS {table}")
