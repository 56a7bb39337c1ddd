"""The storage port of the journal: append entries, read a session or a run back."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Protocol, runtime_checkable

from .records import Entry

__all__ = ["Journal"]


@runtime_checkable
class Journal(Protocol):
    """Where journal entries are kept (in memory, SQLite, ...).

    Implementations keep entries in append order, assign each a ``seq``, never block
    the event loop for long, and are safe for many concurrent sessions.
    """

    async def append(self, entries: Sequence[Entry]) -> None:
        """Store ``entries`` atomically, in order."""
        ...

    async def read(
        self, session_id: str, *, run_id: str | None = None, types: Collection[str] | None = None
    ) -> list[Entry]:
        """The entries of a session (optionally one run, optionally some record types), in order."""
        ...

    async def sessions(self) -> list[str]:
        """Every session id that has entries, in order of first appearance."""
        ...

    async def aclose(self) -> None:
        """Release the storage."""
        ...
