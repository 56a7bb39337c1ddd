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
import threading
from collections.abc import AsyncGenerator, Awaitable, Callable
from types import TracebackType
from typing import Generic, TypeVar

import anyio
import anyio.to_thread

__all__ = ["PerLoop", "SharedLock", "closed_with_loop", "running_loop"]

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


class SharedLock:
    """A lock held by one task at a time among the tasks of every event loop (threads each running one).

    An anyio or asyncio lock wakes its next waiter through the releaser's loop, so a waiter of
    another thread's loop is never woken (its loop sleeps on) and waits forever. Here the
    tasks of one loop queue on a lock of that loop (:class:`PerLoop`), and the first of each
    loop takes a :class:`threading.Lock`, waiting for it in a worker thread while another
    loop's task holds it. The wait stays cancellable: a wait given up leaves its worker to
    release the lock as soon as it gets it. ``async with lock:`` holds it.
    """

    __slots__ = ("_held", "_here")

    def __init__(self) -> None:
        self._held = threading.Lock()
        self._here: PerLoop[anyio.Lock] = PerLoop(anyio.Lock)

    async def __aenter__(self) -> None:
        here = self._here.get()
        await here.acquire()
        try:
            if not self._held.acquire(blocking=False):
                await _take_in_a_thread(self._held)
        except BaseException:
            here.release()
            raise

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._held.release()
        self._here.get().release()


async def _take_in_a_thread(lock: threading.Lock) -> None:
    """Acquire ``lock`` in a worker thread; given up (cancelled), the worker releases it once it gets it."""
    guard = threading.Lock()
    state = {"taken": False, "given_up": False}

    def take() -> None:
        lock.acquire()
        with guard:
            if state["given_up"]:
                lock.release()
            else:
                state["taken"] = True

    try:
        await anyio.to_thread.run_sync(take, abandon_on_cancel=True)
    except BaseException:
        with guard:
            state["given_up"] = True
            taken = state["taken"]
        if taken:  # taken for us just as we gave up
            lock.release()
        raise
