"""An in-memory journal, for tests and short-lived processes."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from types import TracebackType

from .records import Entry

__all__ = ["MemoryJournal"]


class MemoryJournal:
    """Keeps entries in a list; nothing survives the process.

    Appends happen without an await point, so concurrent tasks on one event loop never
    interleave inside a batch.
    """

    def __init__(self) -> None:
        self._entries: list[Entry] = []

    def __repr__(self) -> str:
        return f"MemoryJournal({len(self._entries)} entries)"

    async def append(self, entries: Sequence[Entry]) -> None:
        """Store ``entries`` in order."""
        for e in entries:
            self._entries.append(e.model_copy(update={"seq": len(self._entries) + 1}))

    async def read(
        self, session_id: str, *, run_id: str | None = None, types: Collection[str] | None = None
    ) -> list[Entry]:
        """The entries of a session (optionally one run, optionally some record types), in order."""
        return [
            e
            for e in self._entries
            if e.session_id == session_id
            and (run_id is None or e.run_id == run_id)
            and (types is None or e.record.type in types)
        ]

    async def sessions(self) -> list[str]:
        """Every session id that has entries, in order of first appearance."""
        return list(dict.fromkeys(e.session_id for e in self._entries))

    async def aclose(self) -> None:
        """Nothing to release."""

    async def __aenter__(self) -> MemoryJournal:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
