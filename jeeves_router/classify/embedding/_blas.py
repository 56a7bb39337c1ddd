"""numpy's BLAS held to one thread while the embedded classifier scores (see :func:`blas_single_thread`)."""

from __future__ import annotations

import threading
from contextlib import AbstractContextManager
from typing import Any, ClassVar

__all__ = ["blas_single_thread"]


class _BlasOneThread:
    """Limits numpy's BLAS pool to one thread while any holder is inside (reference-counted).

    BLAS thread counts are process-wide, so overlapping holders on several threads share
    one limit: the first one in sets it and the last one out restores the original. The
    BLAS libraries are found once (threadpoolctl) and then set directly, a few microseconds
    per use instead of threadpoolctl's per-call ``limit()`` (about 19 µs here).
    """

    _lock: ClassVar[threading.Lock] = threading.Lock()
    _depth: ClassVar[int] = 0
    _libs: ClassVar[list[Any] | None] = None  # threadpoolctl's controllers of the loaded BLAS libraries
    _saved: ClassVar[list[tuple[Any, int]]] = []  # (library, its thread count before the limit)

    def __enter__(self) -> None:
        cls = type(self)
        with cls._lock:
            if cls._depth == 0:
                if cls._libs is None:
                    cls._libs = _blas_libraries()
                saved = [(lib, lib.get_num_threads()) for lib in cls._libs]
                cls._saved = [(lib, n) for lib, n in saved if isinstance(n, int) and n != 1]
                for lib, _ in cls._saved:
                    lib.set_num_threads(1)
            cls._depth += 1

    def __exit__(self, *exc: object) -> None:
        cls = type(self)
        with cls._lock:
            cls._depth -= 1
            if cls._depth == 0:
                for lib, n in cls._saved:
                    lib.set_num_threads(n)
                cls._saved = []


def _blas_libraries() -> list[Any]:
    """The controllers (threadpoolctl's) of the BLAS libraries loaded now; none without threadpoolctl."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # pragma: no cover - threadpoolctl ships with the embed extra
        return []
    return [lib for lib in ThreadpoolController().lib_controllers if lib.user_api == "blas"]


def blas_single_thread() -> AbstractContextManager[None]:
    """A context that limits numpy's BLAS to one thread (a no-op without threadpoolctl).

    On small CPUs the BLAS pool's spinning threads compete with onnxruntime's, which makes a
    sub-millisecond matrix product cost several milliseconds; one thread is faster here.
    Safe to enter from several threads at once.
    """
    return _BlasOneThread()
