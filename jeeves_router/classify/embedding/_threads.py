"""Sharing one batch between a few threads, once: the outermost caller splits, nobody below it.

onnxruntime releases the GIL while it runs, so two threads each running a one-thread session
use two cores with none of the spinning of one session on two intra-op threads. A classifier
shares a batch's texts (encoding and scoring), or, when called without one, the encoder shares
its chunks; whichever splits first marks its threads, and code running on them does not split
again (two levels would start four threads on two cores).

An event loop's classifiers move their encoding to worker threads (``offload``) through one
:func:`encode_limiter` per loop: CPU-bound encodes beyond the core count only contend.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

import anyio
from anyio.lowlevel import RunVar

T = TypeVar("T")

_local = threading.local()
_LIMITER: RunVar[anyio.CapacityLimiter] = RunVar("jeeves_router_encode_limiter")


def encode_limiter() -> anyio.CapacityLimiter:
    """One limiter per event loop: CPU-bound encodes beyond the core count only contend."""
    try:
        return _LIMITER.get()
    except LookupError:
        limiter = anyio.CapacityLimiter(os.cpu_count() or 1)
        _LIMITER.set(limiter)
        return limiter


def sharing() -> bool:
    """Whether this thread already runs one share of a batch (then it should not split again)."""
    return bool(getattr(_local, "on", False))


def in_threads(fn: Callable[[T], None], shares: Sequence[T]) -> None:
    """Run ``fn(share)`` for every share at once: the first on this thread, each other on its own.

    Every thread is joined before this returns, also when one fails; the first failure is
    raised on this thread once all have stopped, so nothing is left running.
    """
    errors: list[BaseException] = []

    def guarded(share: T) -> None:
        before = sharing()
        _local.on = True
        try:
            fn(share)
        except BaseException as exc:  # re-raised on the calling thread below
            errors.append(exc)
        finally:
            _local.on = before

    threads = [threading.Thread(target=guarded, args=(share,), name="jeeves-encode") for share in shares[1:]]
    for t in threads:
        t.start()
    try:
        guarded(shares[0])
    finally:
        for t in threads:
            t.join()
    if errors:
        raise errors[0]
