"""The timing harness and the job shared by ``bench/overhead.py`` and ``bench/peers.py``.

Kept apart from ``peers.py`` so that benchmarks of jeeves_router alone (``overhead.py --otel``)
run without the peer frameworks installed.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Awaitable, Callable

ROUTES = ("billing", "technical", "general")
QUESTION = "I was charged twice for my subscription this month, can I get a refund?"
ANSWER_CHUNKS = (
    "Sorry about the double charge. ",
    "I have refunded ",
    "the duplicate payment; ",
    "expect it within ",
    "five business days.",
)
ANSWER = "".join(ANSWER_CHUNKS)
CLASSIFIER_REPLY = "route: billing\nconfidence: 0.9"

Routed = Callable[[str], Awaitable[str]]


async def _warm_up(fn: Routed, warmup: int, text: str) -> None:
    for _ in range(warmup):
        if await fn(text) != ANSWER:
            raise AssertionError(f"{fn.__name__} returned a wrong answer")


async def _timed(fn: Routed, n: int, text: str) -> list[float]:
    samples: list[float] = []
    for _ in range(n):
        start = time.perf_counter()
        await fn(text)
        samples.append(time.perf_counter() - start)
    return samples


async def measure(fn: Routed, n: int = 200, *, warmup: int = 20, text: str = QUESTION) -> float:
    """Median wall time of one ``fn(text)`` call in milliseconds, after ``warmup`` calls.

    Args:
        fn: One routed request; must return ``ANSWER``.
        n: Number of timed calls, made one after the other.
        warmup: Untimed calls first (imports, caches, lazy schema building), each checked.
        text: The user's question.

    Returns:
        The median of ``n`` timings, in milliseconds.
    """
    await _warm_up(fn, warmup, text)
    gc.collect()
    return statistics.median(await _timed(fn, n, text)) * 1000.0


async def measure_all(
    fns: dict[str, Routed], n: int = 200, *, rounds: int = 5, warmup: int = 20, text: str = QUESTION
) -> dict[str, float]:
    """Median milliseconds per request for several contenders, timed in alternating blocks.

    Each contender gets ``rounds`` blocks of ``n // rounds`` consecutive calls, the contenders
    taking turns block by block. Consecutive calls keep each framework's caches warm, as in a
    service that runs only one of them; taking turns spreads the load of other processes on a
    shared machine over all contenders, so their ratios hold when absolute times drift.
    (Alternating call by call instead slows the smallest framework the most: the others evict
    its data from the CPU caches.)

    Args:
        fns: Contenders by name; each must return ``ANSWER``.
        n: Timed calls per contender (rounded down to a multiple of ``rounds``).
        rounds: Blocks per contender.
        warmup: Untimed, checked calls per contender first.
        text: The user's question.

    Returns:
        The median of each contender's pooled timings, in milliseconds, by name.
    """
    for fn in fns.values():
        await _warm_up(fn, warmup, text)
    gc.collect()
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            samples[name] += await _timed(fn, max(1, n // rounds), text)
    return {name: statistics.median(times) * 1000.0 for name, times in samples.items()}


async def measure_interleaved(
    fns: dict[str, Routed], n: int = 200, *, warmup: int = 20, text: str = QUESTION
) -> dict[str, float]:
    """Median milliseconds per request for several contenders, timed call by call in turn.

    Kept for callers of the first version; prefer ``measure_all``. Taking turns on every call
    lets the bigger frameworks evict the smaller ones' data from the CPU caches, which slows the
    smallest contenders most (LangGraph ran about 1.5-2x slower this way than in blocks).

    Args:
        fns: Contenders by name; each must return ``ANSWER``.
        n: Timed calls per contender.
        warmup: Untimed, checked calls per contender first.
        text: The user's question.

    Returns:
        The median of each contender's ``n`` timings, in milliseconds, by name.
    """
    return await measure_all(fns, n, rounds=n, warmup=warmup, text=text)
