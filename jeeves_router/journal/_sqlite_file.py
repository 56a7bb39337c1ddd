"""Which file may be opened as a SQLite journal: one rule for writers and readers.

A file is a jeeves-router journal when it is an SQLite database whose ``entries`` table has
the journal's columns (and whose ``meta`` table, when it has one, the journal's). A journal
is created with both tables in one transaction, so no reader sees half of one. Table names
alone mark nothing: another application's database may well have a ``meta`` table (a
settings store) or an ``entries`` table (a blog).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from .records import JournalError

__all__ = ["check_journal_file", "has_journal_tables"]

_COLUMNS = {
    "entries": {"seq", "session_id", "run_id", "type", "body", "checksum"},
    "meta": {"key", "value"},
}
_READ_FIX = "give the file a JournalRuntime(SQLiteJournal(path)) wrote"
_WRITE_FIX = "give a new or empty file for the journal"


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}


def has_journal_tables(conn: sqlite3.Connection, *, complete: bool = False) -> bool:
    """Whether the database holds a journal: an ``entries`` table of the journal's, and no other ``meta``.

    Args:
        conn: A connection to the database.
        complete: Also require the journal's ``meta`` table (opening creates a missing one).
    """
    if _columns(conn, "entries") != _COLUMNS["entries"]:
        return False
    meta = _columns(conn, "meta")
    return meta == _COLUMNS["meta"] or (not meta and not complete)


def _tables(conn: sqlite3.Connection) -> list[str]:
    rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite%'")
    return sorted(name for (name,) in rows)


def _created_by_an_older_release(conn: sqlite3.Connection) -> bool:
    """A journal an older release is creating: it makes ``meta`` (empty at first) before ``entries``."""
    if _tables(conn) != ["meta"] or _columns(conn, "meta") != _COLUMNS["meta"]:
        return False
    rows: int = conn.execute("SELECT count(*) FROM meta").fetchone()[0]
    return rows == 0


def check_journal_file(path: Path, *, reading: bool = False, timeout: float = 30.0) -> None:
    """Raise :class:`JournalError` when ``path`` cannot be opened as a journal; the file is left unchanged.

    Both a writer and a reader refuse a folder, a file that is no SQLite database, and
    another application's database (tables that are not a journal's, a ``meta`` table of its
    own alone included); nothing is written to it. A writer also takes a missing file in an
    existing folder (no folder is created: a typo in a path is an error naming the missing
    folder), an empty file, and an SQLite database without tables, or with the journal's
    ``meta`` table alone and empty (a journal another process is creating: this release
    creates both tables at once, an older one ``meta`` first). A reader takes only a journal.

    Args:
        path: The journal file.
        reading: The file is only read (``SQLiteJournal(path, create=False)``: ``replay``, ``trace``).
        timeout: Seconds to wait on another connection's lock.

    Raises:
        JournalError: For a path that is no journal (``reading``) or could not become one.
    """
    fix = _READ_FIX if reading else _WRITE_FIX
    if not path.exists():
        if reading:
            raise JournalError(f"journal {path} does not exist: {fix}")
        folder = path.parent
        if not folder.exists():
            if path.parts[0].startswith("~"):  # ``--journal=~/x.db``: no shell expands it
                fix = " (a leading ~ is not expanded here: give the full path, e.g. os.path.expanduser)"
            else:
                fix = f"; create it first (mkdir -p {folder}) or give another path"
            raise JournalError(f"journal {path} cannot be created: the folder {folder} does not exist{fix}")
        if not folder.is_dir():
            raise JournalError(f"journal {path} cannot be created: {folder} is a file, not a folder")
        return
    if not path.is_file():
        raise JournalError(f"journal {path} is not a file (a folder?): give the path of a journal file")
    try:
        with path.open("rb") as f:
            header = f.read(16)
    except OSError:
        return  # opening the journal reports it
    if not header:
        if reading:
            raise JournalError(f"journal {path} is not a jeeves-router journal (no journal tables in it): {fix}")
        return
    if header != b"SQLite format 3\x00":
        raise JournalError(f"journal {path} is not a jeeves-router journal (not an SQLite database): {fix}")
    conn = sqlite3.connect(path, timeout=timeout)
    try:
        ours = has_journal_tables(conn) or (not reading and _created_by_an_older_release(conn))
        tables = [] if ours else _tables(conn)
    except sqlite3.DatabaseError:
        return  # a damaged journal, or a lock held too long: opening it says so
    finally:
        conn.close()
    if ours or (not tables and not reading):
        return
    if reading:
        raise JournalError(f"journal {path} is not a jeeves-router journal (no journal tables in it): {fix}")
    shown = ", ".join(tables[:5]) + (", ..." if len(tables) > 5 else "")
    raise JournalError(
        f"journal {path} is not a jeeves-router journal: it is another database (tables {shown}), "
        f"which would get the journal's tables; {fix}"
    )
