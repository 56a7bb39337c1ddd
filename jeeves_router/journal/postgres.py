"""A journal in PostgreSQL, for sessions and durable runs shared by many machines.

Needs ``psycopg`` 3 (``pip install 'jeeves-router[postgres]'``). Entries go to one table
(default ``jeeves_journal``, created when missing; a reader, ``create=False``, creates
nothing) as the same versioned JSON the SQLite journal stores; ``seq`` is a ``BIGSERIAL``,
so entries keep their append order across writers. A ``seq`` is taken at insert and
transactions may commit out of that order, so an append first takes a transaction-level
advisory lock per session (keyed by table and session id): the appends of one session commit
one at a time, and a reader that sees an entry sees every earlier entry of its session —
what the claims of ``tool.started`` and ``run.start`` rely on. The journal holds one
connection per event loop (a connection and its lock belong to the loop that made them: an
agent run by two threads, each running its own loop, or by two ``asyncio.run`` calls in
turn, uses one in each), used by one query at a time and closed when its loop shuts down; an
append is one transaction and is shielded from cancellation, so a step that completed is
recorded even if its run is cancelled right after.

Integrity rests on the database's access control: unlike :class:`SQLiteJournal`, entries
carry no checksum chain.

Example:
    Runs and sessions shared by every replica of a service (needs a PostgreSQL server)::

        from jeeves_router.journal import JournalRuntime, PostgresJournal, SessionHistory

        journal = PostgresJournal("postgresql://jeeves@db.internal/jeeves")
        runtime = JournalRuntime(journal, session_history=SessionHistory())
"""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator, Collection, Sequence
from types import TracebackType
from typing import Any

import anyio

from .._loops import PerLoop, closed_with_loop
from ._decode import decode_entry
from .records import RECORD_TYPES, Entry, JournalError

__all__ = ["PostgresJournal"]

_TABLE = re.compile(r"[a-z_][a-z0-9_]{0,62}")


class _Link:
    """One event loop's connection (made on its first query), its lock, and what closes it with the loop."""

    __slots__ = ("conn", "keeper", "lock")

    def __init__(self) -> None:
        self.lock = anyio.Lock()
        self.conn: Any = None
        self.keeper: AsyncGenerator[None, None] | None = None

    def keep(self, conn: Any) -> None:
        """Use ``conn``, closed when the running loop shuts down (an async generator it finalises)."""
        self.conn = conn
        self.keeper = closed_with_loop(conn.close)

    async def aclose(self) -> None:
        if self.keeper is not None:
            await self.keeper.aclose()  # closes the connection (a no-op if its loop's shutdown did)
        self.conn = self.keeper = None


class PostgresJournal:
    """A journal in a PostgreSQL table.

    Args:
        url: A libpq connection string (``postgresql://user@host:port/db``); it may hold a
            password, so it is never shown in ``repr`` or errors.
        table: The table's name (lower-case letters, digits, ``_``).
        create: Create the table (and its index) when missing, on connecting. ``False``: only
            read an existing journal (``replay``, ``trace``: the wrong database is left as it
            is), and a missing table is a :class:`JournalError` naming the database and table.
    """

    def __init__(self, url: str, *, table: str = "jeeves_journal", create: bool = True) -> None:
        if not isinstance(url, str) or not url:
            raise JournalError("PostgresJournal needs a connection URL, e.g. postgresql://user@host/db")
        if not _TABLE.fullmatch(table):
            raise JournalError(f"table must be lower-case letters, digits and '_' (at most 63), got {table!r}")
        self._url = url
        self.table = table
        self._create = create
        self._links: PerLoop[_Link] = PerLoop(_Link)  # one per event loop

    def __repr__(self) -> str:
        return f"PostgresJournal(table={self.table!r})"

    def _link(self) -> _Link:
        """The running loop's link; the links of loops that have ended are forgotten (their shutdown closed them)."""
        return self._links.get()

    async def _connection(self, link: _Link) -> Any:
        if link.conn is not None and not link.conn.closed:
            return link.conn
        try:
            import psycopg
        except ImportError as exc:
            raise JournalError("PostgresJournal needs psycopg 3: pip install 'jeeves-router[postgres]'") from exc
        conn = None
        try:
            conn = await psycopg.AsyncConnection.connect(self._url, autocommit=True)
            found = await self._create_table(conn) if self._create else await self._has_table(conn)
            database = conn.info.dbname  # named in errors, never the URL: it may hold a password
        except psycopg.Error as exc:
            if conn is not None:
                await conn.close()
            what = "connect or create the table" if self._create else "connect"
            may = " and the user may create tables" if self._create else ""
            raise JournalError(
                f"{self!r}: cannot {what} ({type(exc).__name__}); check that the server in the URL is running{may}"
            ) from None
        if not found:  # a reader, on another database: it is left as it is
            await conn.close()
            raise JournalError(
                f"PostgreSQL database {database!r} has no table {self.table!r}: it holds no jeeves-router journal; "
                "give the URL a JournalRuntime(PostgresJournal(url)) wrote"
            )
        link.keep(conn)
        return conn

    async def _create_table(self, conn: Any) -> bool:
        """Create the table and its index when missing (a writer); ``True``."""
        async with conn.transaction():
            # Two processes creating the table at once collide in PostgreSQL's catalog
            # (UniqueViolation on pg_type), IF NOT EXISTS notwithstanding: one creates at a time.
            await conn.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [f"jeeves-router schema:{self.table}"]
            )
            await conn.execute(
                f"CREATE TABLE IF NOT EXISTS {self.table} (seq BIGSERIAL PRIMARY KEY, session_id TEXT NOT NULL, "
                "run_id TEXT NOT NULL, type TEXT NOT NULL, body TEXT NOT NULL)"
            )
            await conn.execute(
                f"CREATE INDEX IF NOT EXISTS {self.table}_by_session ON {self.table} (session_id, run_id, seq)"
            )
        return True

    async def _has_table(self, conn: Any) -> bool:
        """Whether the table is there (a reader: nothing is created)."""
        cur = await conn.execute("SELECT to_regclass(%s) IS NOT NULL", [self.table])
        row = await cur.fetchone()
        return bool(row and row[0])

    async def _query(self, sql: str, args: Sequence[Any]) -> list[tuple[Any, ...]]:
        import psycopg

        link = self._link()
        async with link.lock:
            conn = await self._connection(link)
            try:
                cur = await conn.execute(sql, args)
                return list(await cur.fetchall()) if cur.description is not None else []
            except psycopg.Error as exc:
                raise JournalError(f"{self!r}: query failed: {type(exc).__name__}: {exc.sqlstate}") from None

    async def append(self, entries: Sequence[Entry]) -> None:
        """Store ``entries`` in one transaction, in order (not interrupted by cancellation)."""
        if not entries:
            return
        import psycopg

        rows = [(e.session_id, e.run_id, e.record.type, e.body()) for e in entries]
        with anyio.CancelScope(shield=True):
            link = self._link()
            async with link.lock:
                conn = await self._connection(link)
                try:
                    async with conn.transaction(), conn.cursor() as cur:
                        for sid in sorted({e.session_id for e in entries}):  # in one order: no deadlock
                            await cur.execute(
                                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", [f"{self.table}:{sid}"]
                            )
                        await cur.executemany(
                            f"INSERT INTO {self.table} (session_id, run_id, type, body) VALUES (%s, %s, %s, %s)", rows
                        )
                except psycopg.Error as exc:
                    raise JournalError(
                        f"{self!r}: cannot write {len(rows)} entries: {type(exc).__name__}: {exc.sqlstate}"
                    ) from None

    async def read(
        self, session_id: str, *, run_id: str | None = None, types: Collection[str] | None = None
    ) -> list[Entry]:
        """The entries of a session (optionally one run, optionally some record types), in order."""
        sql = f"SELECT seq, body FROM {self.table} WHERE session_id = %s"
        args: list[Any] = [session_id]
        if run_id is not None:
            sql += " AND run_id = %s"
            args.append(run_id)
        if types is not None:  # and any a newer release wrote: decode_entry refuses it, not skipped
            sql += " AND (type = ANY(%s) OR NOT type = ANY(%s))"
            args += [sorted(types), sorted(RECORD_TYPES)]
        rows = await self._query(sql + " ORDER BY seq", args)
        return [decode_entry(body, seq=seq, journal=repr(self), session_id=session_id) for seq, body in rows]

    async def sessions(self) -> list[str]:
        """Every session id that has entries, in order of first appearance."""
        rows = await self._query(f"SELECT session_id FROM {self.table} GROUP BY session_id ORDER BY MIN(seq)", [])
        return [r[0] for r in rows]

    async def aclose(self) -> None:
        """Close the running event loop's connection (a later call reopens it).

        One another thread's loop still uses is closed by that loop's shutdown.
        """
        link = self._link()
        async with link.lock:
            await link.aclose()

    async def __aenter__(self) -> PostgresJournal:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
