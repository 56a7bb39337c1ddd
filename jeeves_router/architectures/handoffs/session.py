"""Where sticky handoff routing remembers which agent answered a session last.

A :class:`SessionStore` maps a session id to the name of the agent that answered that
session's last turn. :class:`InMemorySessionStore` is the default; anything with the same
three async methods (a Redis or SQL table, for instance) can replace it.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Protocol, runtime_checkable

from ...errors import UsageError

__all__ = ["SessionStore", "InMemorySessionStore"]


@runtime_checkable
class SessionStore(Protocol):
    """Remembers the last answering agent per session."""

    async def get(self, session_id: str) -> str | None:
        """The agent that answered ``session_id`` last, or ``None``."""
        ...

    async def set(self, session_id: str, agent: str) -> None:
        """Remember that ``agent`` answered ``session_id``."""
        ...

    async def delete(self, session_id: str) -> None:
        """Forget ``session_id`` (the next turn is routed afresh)."""
        ...


class InMemorySessionStore:
    """A process-local store that keeps the most recently used ``max_sessions`` sessions.

    Args:
        max_sessions: Bound on remembered sessions; the least recently used is dropped.
    """

    def __init__(self, max_sessions: int = 10_000) -> None:
        if not isinstance(max_sessions, int) or max_sessions < 1:
            raise UsageError(f"max_sessions must be a positive integer, got {max_sessions!r}")
        self.max_sessions = max_sessions
        self._data: OrderedDict[str, str] = OrderedDict()

    def __len__(self) -> int:
        return len(self._data)

    async def get(self, session_id: str) -> str | None:
        """The agent that answered ``session_id`` last, or ``None``."""
        agent = self._data.get(session_id)
        if agent is not None:
            self._data.move_to_end(session_id)
        return agent

    async def set(self, session_id: str, agent: str) -> None:
        """Remember that ``agent`` answered ``session_id``."""
        self._data[session_id] = agent
        self._data.move_to_end(session_id)
        while len(self._data) > self.max_sessions:
            self._data.popitem(last=False)

    async def delete(self, session_id: str) -> None:
        """Forget ``session_id``."""
        self._data.pop(session_id, None)
