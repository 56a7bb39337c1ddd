"""The recovery ladder's clock under a test's control (not a test module)."""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace

import anyio


class Clock:
    """The recovery ladder's clock (``time`` as ``jeeves_router.recovery.run`` reads it).

    Real time plus ``skipped``; :meth:`hold` stops it where it is until :meth:`release`, so
    a test decides when a run's time limit can pass, however slowly the machine runs up to
    there. The run's time box (``anyio.fail_after`` in ``jeeves_router.recovery.clock``, see
    :attr:`box_anyio`) is held with it: a box opened while the clock is held waits its real
    seconds from :meth:`release` on, not from its opening, so the way from the box into the
    call it bounds is never counted, whatever the load.
    """

    def __init__(self) -> None:
        self.skipped = 0.0
        self.held: float | None = None
        self._lock = threading.Lock()  # release() may come from another thread (a loopback server's)
        self._waiting: list[tuple[asyncio.AbstractEventLoop, anyio.CancelScope, float]] = []
        self.box_anyio = SimpleNamespace(fail_after=self._fail_after)

    def monotonic(self) -> float:
        return self.held if self.held is not None else time.monotonic() + self.skipped

    def hold(self) -> None:
        self.held = self.monotonic()

    def release(self) -> None:
        with self._lock:
            self.held = None
            waiting, self._waiting = self._waiting, []
        for loop, scope, delay in waiting:
            deadline = loop.time() + delay  # the loop's clock, readable from any thread
            if _running_loop() is loop:
                scope.deadline = deadline
            else:
                loop.call_soon_threadsafe(setattr, scope, "deadline", deadline)

    @contextmanager
    def _fail_after(self, delay: float) -> Iterator[anyio.CancelScope]:
        """``anyio.fail_after`` whose time starts at :meth:`release` when opened while held."""
        with self._lock:
            held = self.held is not None
        if not held:
            with anyio.fail_after(delay) as scope:
                yield scope
            return
        with anyio.fail_after(math.inf) as scope:  # its deadline is set by release()
            entry = (asyncio.get_running_loop(), scope, delay)
            with self._lock:
                if self.held is None:  # released in between
                    scope.deadline = anyio.current_time() + delay
                else:
                    self._waiting.append(entry)
            try:
                yield scope
            finally:
                with self._lock:
                    if entry in self._waiting:
                        self._waiting.remove(entry)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
