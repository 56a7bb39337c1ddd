"""What belongs to one event loop: kept per loop, and closed when that loop shuts down.

An HTTP client's pooled connections, a database connection, an asyncio lock's waiters: each
belongs to the event loop that made it and can be used, and closed, only there. An object
used by two ``asyncio.run`` calls in turn, or by two threads each running its own loop,
keeps one of them per loop (:class:`PerLoop`), and has each closed when its loop shuts down
(:func:`closed_with_loop`): ``asyncio.run`` and ``anyio.run`` finalise the loop's async
generators on the way out, and one of ours, started with the resource, closes it then. A
script that never closes what it used leaves nothing open at exit.

Under an event loop library other than asyncio there is no loop object to key on: everything
goes under ``None``, one value for all, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Generic, TypeVar

__all__ = ["PerLoop", "closed_with_loop", "running_loop"]

T = TypeVar("T")
Loop = asyncio.AbstractEventLoop


def running_loop() -> Loop | None:
    """The running asyncio event loop; ``None`` outside one (or under another event loop library)."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


async def _closing_when_closed(close: Callable[[], Awaitable[object]]) -> AsyncGenerator[None, None]:
    """Awaits ``close()`` when closed: by its owner's ``aclose``, or by its loop's shutdown."""
    try:
        yield
    finally:
        with contextlib.suppress(Exception):  # a loop's shutdown has no one to report to
            await close()


def closed_with_loop(close: Callable[[], Awaitable[object]]) -> AsyncGenerator[None, None]:
    """An async generator, started in the running loop, that awaits ``close()`` when it is closed.

    The loop tracks it from its first step (asyncio's first-iteration hook) and closes it when
    the loop shuts down; its owner may close it earlier with ``await keeper.aclose()`` (then
    the loop's shutdown has nothing left to do). Call it inside the loop the resource belongs to.

    Args:
        close: What closes the resource (``client.close``, ``conn.close``).

    Returns:
        The started generator (keep it: its ``aclose()`` closes the resource once).
    """
    keeper = _closing_when_closed(close)
    step = keeper.__anext__()  # the loop's first-iteration hook registers the generator here
    with contextlib.suppress(StopIteration):
        step.send(None)  # runs to its ``yield``: nothing in between awaits
    return keeper


class PerLoop(Generic[T]):
    """One value per event loop, made on the loop's first use; the values of ended loops are forgotten.

    Args:
        make: Makes the value of a loop that has none yet (called in that loop).
    """

    __slots__ = ("_make", "_values")

    def __init__(self, make: Callable[[], T]) -> None:
        self._make = make
        self._values: dict[Loop | None, T] = {}

    def get(self) -> T:
        """The running loop's value, made now if it has none."""
        loop = running_loop()
        value = self._values.get(loop)
        if value is None:
            self.forget_ended()
            value = self._values[loop] = self._make()
        return value

    def forget_ended(self) -> None:
        """Drop the values of loops that have ended (their shutdown closed what needed closing)."""
        for owner in [owner for owner in list(self._values) if owner is not None and owner.is_closed()]:
            self._values.pop(owner, None)

    def take_closable(self) -> list[T]:
        """Remove and return the values this loop may close: its own, and those of loops that have ended.

        The value of another thread's loop that is still running stays: that loop uses it, and
        its shutdown closes it.
        """
        loop = running_loop()
        owners = [owner for owner in list(self._values) if owner is loop or owner is None or owner.is_closed()]
        return [value for owner in owners if (value := self._values.pop(owner, None)) is not None]
