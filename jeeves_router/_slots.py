"""The concurrency limit of every front door: a run gets a slot now or is refused, never queued.

One mechanism for the HTTP server (``jeeves-router serve``: a run over the limit gets 429 with
``Retry-After``) and the MCP server (``jeeves-router mcp``: an ``ask`` over the limit is an error
result saying the server is busy), under one name: ``max_concurrency=`` in code,
``--max-concurrency`` on the command line, :data:`DEFAULT_MAX_CONCURRENCY` runs by default.
"""

from __future__ import annotations

import threading

from ._log import get_logger
from .errors import UsageError, argument_named

__all__ = ["DEFAULT_MAX_CONCURRENCY", "Slots", "check_max_concurrency"]

log = get_logger(__name__)

#: Runs in flight at once by default: ``create_app``, ``router_server`` and ``mcp.server.serve``'s
#: ``max_concurrency=``, the ``--max-concurrency`` of ``jeeves-router serve`` and ``jeeves-router mcp``.
DEFAULT_MAX_CONCURRENCY = 64


def check_max_concurrency(name: str, value: object) -> int:
    """``value``, a concurrency limit named ``name``, once it is a positive integer (not a bool).

    Raises:
        UsageError: naming ``name`` and the value given.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{name} must be a positive integer, got {value!r}", argument=argument_named(name))
    return value


class Slots:
    """A non-blocking concurrency limit: a run either takes a slot now or is refused.

    Safe across threads: one app may be served by several servers at once, each in a thread
    of its own with its own event loop (the limit is the app's, over all of them).

    Args:
        limit: Runs in flight at once.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self.in_flight = 0

    @property
    def busy(self) -> str:
        """Why a run was refused (each front door adds what to do)."""
        return f"the server is running its limit of {self.limit} concurrent runs"

    def acquire(self) -> bool:
        """Take a slot: ``True``, or ``False`` when every slot is taken (the caller refuses the run).

        A refusal is logged (``run.refused``, WARNING, with the limit): the server is at its
        capacity, which its operator should hear of from either front door.
        """
        with self._lock:  # the count is read and written at once: two threads cannot both take the last slot
            free = self.in_flight < self.limit
            if free:
                self.in_flight += 1
        if not free:
            log.warning("run.refused", reason="busy", limit=self.limit)
        return free

    def release(self) -> None:
        """Give a slot back."""
        with self._lock:
            self.in_flight -= 1
