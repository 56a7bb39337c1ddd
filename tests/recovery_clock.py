"""The recovery ladder's clock under a test's control (not a test module)."""

from __future__ import annotations

import time


class Clock:
    """The recovery ladder's clock (``time`` as ``jeeves_router.recovery.run`` reads it).

    Real time plus ``skipped``; :meth:`hold` stops it where it is until :meth:`release`, so
    a test decides when a run's time limit can pass, however slowly the machine runs up to
    there (the run's time box still waits in real time).
    """

    def __init__(self) -> None:
        self.skipped = 0.0
        self.held: float | None = None

    def monotonic(self) -> float:
        return self.held if self.held is not None else time.monotonic() + self.skipped

    def hold(self) -> None:
        self.held = self.monotonic()

    def release(self) -> None:
        self.held = None
