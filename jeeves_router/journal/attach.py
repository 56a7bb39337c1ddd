"""A journal for served agents: what ``--journal`` means to ``jeeves-router serve`` and ``jeeves-router mcp``.

Both front ends take a journal — a :class:`~jeeves_router.journal.base.Journal`, a SQLite file
path or a ``postgresql://`` URL — and do the same with it (:func:`journal_agents`): every served
agent without a runtime gets ``JournalRuntime(journal, session_history=...)`` (its runs are
journaled, a session id continues the session's stored history, an idempotency key names a
run); an agent that already has a ``JournalRuntime`` keeps it; one with another runtime is
refused. The front end closes the journals in use when it stops. ``jeeves-router replay`` and
``trace`` open the journal they read with the same :func:`open_journal` (``reading=True``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..errors import UsageError
from ..runtime import PASS_THROUGH
from .base import Journal
from .runtime import JournalRuntime
from .sessions import SessionHistory

if TYPE_CHECKING:
    from ..agent import Agent

__all__ = ["DEFAULT_HISTORY", "JournalSpec", "is_postgres_url", "journal_agents", "open_journal"]

#: The history limits of the sessions a served journal keeps, unless told otherwise.
DEFAULT_HISTORY = SessionHistory()

#: A journal, or where one is: a SQLite file path or a ``postgresql://`` URL.
JournalSpec = Journal | str | os.PathLike[str]


def is_postgres_url(spec: str | os.PathLike[str]) -> bool:
    """Whether ``spec`` names a PostgreSQL journal (a ``postgresql://`` URL) rather than a SQLite file."""
    return isinstance(spec, str) and spec.startswith(("postgresql://", "postgres://"))


def open_journal(spec: str | os.PathLike[str], *, reading: bool = False, key: bytes | None = None) -> Journal:
    """A ``postgresql://`` URL as a :class:`PostgresJournal`, anything else as a SQLite file.

    The SQLite file is checked at once (:func:`~._sqlite_file.check_journal_file`), not at
    the first request.

    Args:
        spec: The journal, as ``--journal`` (``serve``, ``mcp``) or ``replay``/``trace`` name it.
        reading: Only read it (``replay``, ``trace``): a SQLite file must be a journal already
            (``SQLiteJournal(path, create=False)``), and so must a PostgreSQL table
            (``PostgresJournal(url, create=False)``: nothing is created in the database).
        key: A SQLite journal's key (``SQLiteJournal(path, key=...)``); a PostgreSQL journal has none.

    Raises:
        UsageError: the SQLite file exists and holds something else than a journal (it is left as it
            is), or is missing and so is its folder (no folder is created), or, ``reading``, is
            missing; a ``key`` for a PostgreSQL journal.
    """
    if is_postgres_url(spec):
        from .postgres import PostgresJournal

        if key is not None:
            raise UsageError("a PostgreSQL journal has no key (its entries carry no checksum); leave it out")
        return PostgresJournal(str(spec), create=not reading)
    from ._sqlite_file import check_journal_file
    from .records import JournalError
    from .sqlite import SQLiteJournal

    store = SQLiteJournal(spec, create=not reading, key=key)
    try:
        check_journal_file(store.path, reading=reading)  # at start: another database, a missing folder
    except JournalError as exc:
        raise UsageError(str(exc)) from None
    return store


def journal_agents(
    agents: Mapping[str, Agent], journal: JournalSpec | None, history: SessionHistory | None = DEFAULT_HISTORY
) -> list[Journal]:
    """Give the agents without a runtime a journaling one on ``journal``; return every journal in use.

    Args:
        agents: The served agents, by the name they are served under (for error messages).
        journal: The journal (opened with :func:`open_journal` when it is a path or URL);
            ``None``: no agent gets one, and only the journals of agents that have a
            ``JournalRuntime`` already are returned.
        history: The session history limits of the runtimes made here (``None``: a request
            sees only the history it sends).

    Raises:
        UsageError: an agent has a runtime that is not a ``JournalRuntime`` and ``journal`` is given.
    """
    store = open_journal(journal) if isinstance(journal, (str, os.PathLike)) else journal
    found: list[Journal] = []
    for name, agent in agents.items():
        runtime = agent.runtime
        if isinstance(runtime, JournalRuntime):
            if all(runtime.journal is not j for j in found):
                found.append(runtime.journal)
        elif store is not None:
            if runtime is not PASS_THROUGH:
                raise UsageError(
                    f"agent {name!r} already has the runtime {runtime!r}; serve it without a journal or give it "
                    "a JournalRuntime yourself"
                )
            agent.runtime = JournalRuntime(store, session_history=history)
    if store is not None and all(store is not j for j in found):
        found.insert(0, store)
    return found
