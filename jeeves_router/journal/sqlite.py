"""The embedded default journal: one SQLite file in WAL mode.

The file is created with owner-only permissions (0600; SQLite gives its ``-wal`` and
``-shm`` files the same mode). All access goes through one connection guarded by a lock
and runs in a worker thread (``anyio.to_thread``), so the event loop never waits on disk
and many concurrent sessions in one process write safely; several processes may share
the file (writes take SQLite's write lock with ``BEGIN IMMEDIATE``).

Each entry carries an HMAC-SHA256 checksum chained to the previous entry of the same
(session, run): a changed, reordered or removed entry is reported as
:class:`~jeeves_router.journal.records.JournalCorrupt` naming the file and the entry. A
truncated tail (a crash before the last write) is not corruption. The default key only
catches damage and casual edits; pass your own ``key`` to make forging entries require
it.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import shutil
import sqlite3
import tempfile
import threading
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from types import TracebackType
from typing import TypeVar

import anyio
import anyio.to_thread

from .._log import get_logger
from ._decode import check_file_version, decode_entry
from ._sqlite_file import check_journal_file, has_journal_tables
from .records import RECORD_TYPES, SCHEMA_VERSION, Entry, JournalCorrupt, JournalError

__all__ = ["SQLiteJournal"]

log = get_logger(__name__)
T = TypeVar("T")

_DEFAULT_KEY = b"jeeves-router journal v1"
_BUSY_TIMEOUT = 30.0  # seconds a connection waits on another's lock (SQLite's busy timeout, and opening)
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS entries (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    type TEXT NOT NULL,
    body TEXT NOT NULL,
    checksum TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS entries_by_run ON entries (session_id, run_id, seq);
"""
_VERSION = f"INSERT OR IGNORE INTO meta VALUES ('schema_version', '{SCHEMA_VERSION}');"


class _Busy(Exception):
    """Opening met a lock SQLite would not wait on; :meth:`SQLiteJournal._run` tries again."""


def _is_busy(exc: BaseException) -> bool:
    """Another connection's lock: SQLITE_BUSY or SQLITE_LOCKED, not damage.

    ``sqlite_errorcode`` is Python 3.11+; before it, the message tells.
    """
    if not isinstance(exc, sqlite3.OperationalError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF in (5, 6) if code is not None else "is locked" in str(exc)


_HEAD = "SELECT checksum FROM entries WHERE session_id = ? AND run_id = ? ORDER BY seq DESC LIMIT 1"


class SQLiteJournal:
    """A journal in one SQLite file.

    Args:
        path: The database file; created (0600) when missing unless ``create=False``. Its
            folder must exist (a :class:`JournalError` names a missing one; none is created).
        create: Create the file when it does not exist (``False``: raise JournalError, and
            also for a file that holds no journal, which is then left unchanged). Either way,
            another application's database or a file that is no database is refused and left
            unchanged (:func:`~jeeves_router.journal._sqlite_file.check_journal_file`).
        key: HMAC key of the entry checksums (default: a fixed key, see module docs).
        synchronous: SQLite ``synchronous`` pragma: ``"NORMAL"`` (default) survives a
            process crash; ``"FULL"`` also survives power loss, at a cost per write.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        create: bool = True,
        key: bytes | None = None,
        synchronous: str = "NORMAL",
    ) -> None:
        if synchronous not in ("NORMAL", "FULL"):
            raise JournalError(f"synchronous must be 'NORMAL' or 'FULL', got {synchronous!r}")
        self.path = Path(path)
        self._create = create
        self._key = key or _DEFAULT_KEY
        self._synchronous = synchronous
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"SQLiteJournal({str(self.path)!r})"

    # -- connection -----------------------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        if self._conn is not None:
            return self._conn
        check_journal_file(self.path, reading=not self._create, timeout=_BUSY_TIMEOUT)  # a missing file's folder exists
        if not self.path.exists():
            try:
                os.close(os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
            except FileExistsError:
                pass  # another process created it first
            except OSError as exc:
                raise JournalError(f"journal {self.path} cannot be created: {exc}") from exc
        # Opens lazily: the file is first read by the statements below.
        conn = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT, check_same_thread=False, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={self._synchronous}")
            if not has_journal_tables(conn, complete=True):  # a new file: all of a journal at once (_sqlite_file)
                conn.executescript(f"BEGIN IMMEDIATE; {_SCHEMA} {_VERSION} COMMIT;")
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            if row is None:
                conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            else:
                check_file_version(row[0], journal=f"journal {self.path}")
        except BaseException as exc:
            conn.close()
            if _is_busy(exc):
                # Another connection holds a lock SQLite will not wait on here (switching a new
                # file to WAL while another process creates the schema): not damage; _run retries.
                raise _Busy(str(exc)) from exc
            if isinstance(exc, sqlite3.DatabaseError):
                raise JournalCorrupt(
                    f"journal {self.path} cannot be opened: {exc}; {self._salvage_point()} (truncated or damaged file)"
                ) from exc
            raise
        self._conn = conn
        return conn

    def _salvage_point(self) -> str:
        """Which entry is the first unreadable one, in storage order (for error messages).

        A truncated SQLite file is refused as a whole; a scratch copy padded back to the
        size its header declares lets the readable entries be counted.
        """
        last = 0
        try:
            with tempfile.TemporaryDirectory() as tmp:
                copy = Path(tmp) / "salvage.db"
                shutil.copyfile(self.path, copy)
                header = copy.read_bytes()[:100]
                page_size = int.from_bytes(header[16:18], "big")
                page_size = 65536 if page_size == 1 else page_size
                declared = int.from_bytes(header[28:32], "big") * page_size
                if copy.stat().st_size < declared:
                    os.truncate(copy, declared)
                ro = sqlite3.connect(f"{copy.as_uri()}?mode=ro", uri=True)
                try:
                    for (seq,) in ro.execute("SELECT seq FROM entries ORDER BY rowid"):
                        last = seq
                finally:
                    ro.close()
        except (sqlite3.DatabaseError, OSError):
            return f"entries up to {last} can be read, entry {last + 1} or a later one cannot"
        return f"all {last} entries can be read, but the file's structure is damaged"

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        def locked() -> T:
            with self._lock:
                return fn(self._open())

        delay, deadline = 0.002, anyio.current_time() + _BUSY_TIMEOUT
        while True:
            try:
                return await anyio.to_thread.run_sync(locked)
            except _Busy as exc:
                # Only opening raises _Busy, before ``fn`` ran: trying again repeats nothing.
                if anyio.current_time() >= deadline:
                    raise JournalError(
                        f"journal {self.path} cannot be opened: another connection kept it locked for "
                        f"{_BUSY_TIMEOUT:g} s ({exc})"
                    ) from exc.__cause__
                await anyio.sleep(delay)
                delay = min(delay * 2, 0.25)

    def _checksum(self, prev: str, session_id: str, run_id: str, type_: str, body: str) -> str:
        msg = "\x1f".join((prev, session_id, run_id, type_, body)).encode("utf-8")
        return hmac.new(self._key, msg, hashlib.sha256).hexdigest()

    # -- Journal protocol -----------------------------------------------------------------

    async def append(self, entries: Sequence[Entry]) -> None:
        """Store ``entries`` in one transaction, in order."""
        if not entries:
            return
        rows = [(e.session_id, e.run_id, e.record.type, e.body()) for e in entries]

        def write(conn: sqlite3.Connection) -> None:
            heads: dict[tuple[str, str], str] = {}
            conn.execute("BEGIN IMMEDIATE")
            try:
                for sid, rid, type_, body in rows:
                    if (sid, rid) not in heads:
                        r = conn.execute(_HEAD, (sid, rid)).fetchone()
                        heads[(sid, rid)] = r[0] if r else ""
                    check = self._checksum(heads[(sid, rid)], sid, rid, type_, body)
                    conn.execute(
                        "INSERT INTO entries (session_id, run_id, type, body, checksum) VALUES (?, ?, ?, ?, ?)",
                        (sid, rid, type_, body, check),
                    )
                    heads[(sid, rid)] = check
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

        try:
            await self._run(write)
        except sqlite3.DatabaseError as exc:
            raise JournalError(f"journal {self.path}: cannot write {len(rows)} entries: {exc}") from exc

    async def read(
        self, session_id: str, *, run_id: str | None = None, types: Collection[str] | None = None
    ) -> list[Entry]:
        """The entries of a session (optionally one run, optionally some types), verified.

        Each returned entry is checked against its checksum and the checksum of the entry
        before it in its run (which SQLite finds without reading the other bodies).
        """
        where, args = "session_id = ?", [session_id]
        if run_id is not None:
            where, args = where + " AND run_id = ?", [session_id, run_id]
        sql = (
            "SELECT c.seq, c.run_id, c.type, e.body, c.checksum, c.prev FROM (SELECT seq, run_id, type, checksum, "
            "LAG(checksum, 1, '') OVER (PARTITION BY run_id ORDER BY seq) AS prev FROM entries "
            f"WHERE {where}) AS c JOIN entries AS e ON e.seq = c.seq"
        )
        if types is not None:  # and any a newer release wrote: decode_entry refuses it, not skipped
            kinds, known = sorted(types), sorted(RECORD_TYPES)
            sql += f" WHERE c.type IN ({', '.join('?' * len(kinds))}) OR c.type NOT IN ({', '.join('?' * len(known))})"
            args += kinds + known
        sql += " ORDER BY c.seq"

        def fetch(conn: sqlite3.Connection) -> list[tuple[int, str, str, str, str, str]]:
            out: list[tuple[int, str, str, str, str, str]] = []
            try:
                for row in conn.execute(sql, args):
                    out.append(row)
            except sqlite3.DatabaseError as exc:
                if _is_busy(exc):
                    raise JournalError(f"journal {self.path}: session {session_id!r} cannot be read: {exc}") from exc
                after = f"after entry {out[-1][0]}" if out else "at its first entry"
                raise JournalCorrupt(
                    f"journal {self.path}: session {session_id!r} cannot be read {after}: {exc} "
                    "(the file is truncated or damaged)"
                ) from exc
            return out

        entries: list[Entry] = []
        for seq, rid, type_, body, check, prev in await self._run(fetch):
            expected = self._checksum(prev, session_id, rid, type_, body)
            if not hmac.compare_digest(expected, check):
                raise JournalCorrupt(
                    f"journal {self.path}: entry {seq} (session {session_id!r}, run {rid!r}, {type_}) fails its "
                    "checksum: it was modified, reordered, or the entry before it in its run was removed; or the "
                    "journal was written with another key (SQLiteJournal(path, key=...); replay and trace: "
                    "--key-env VAR)"
                )
            entries.append(decode_entry(body, seq=seq, journal=f"journal {self.path}", session_id=session_id))
        return entries

    async def sessions(self) -> list[str]:
        """Every session id that has entries, in order of first appearance."""

        def fetch(conn: sqlite3.Connection) -> list[str]:
            rows = conn.execute("SELECT session_id, MIN(seq) AS first FROM entries GROUP BY session_id ORDER BY first")
            return [r[0] for r in rows]

        try:
            return await self._run(fetch)
        except sqlite3.DatabaseError as exc:
            if _is_busy(exc):
                raise JournalError(f"journal {self.path}: sessions cannot be listed: {exc}") from exc
            raise JournalCorrupt(f"journal {self.path} cannot be read: {exc} (truncated or damaged)") from exc

    def close(self) -> None:
        """Close the connection now, without an event loop (a later call reopens it).

        For synchronous code: the end of a script whose runs are over, a test fixture. It waits
        for a statement in flight in a worker thread to finish; from async code, use
        :meth:`aclose` (or ``async with``), which waits in a worker thread instead of on the loop.
        """
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    async def aclose(self) -> None:
        """Close the connection (a later call reopens it), also from a cancelled task."""
        if self._conn is not None:
            with anyio.CancelScope(shield=True):  # cancelled, it would leave the connection open
                await anyio.to_thread.run_sync(self.close)

    async def __aenter__(self) -> SQLiteJournal:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
