"""What tests read to check that a run left no task running and no warning (not a test module).

Other libraries start tasks of their own that are not ours to judge: an ``openai`` or
``anthropic`` client an earlier test left open schedules its ``aclose()`` as a task when the
garbage collector finalises it, which can happen at any allocation of a later test. So a
test takes its reading with :func:`settled_tasks` (earlier garbage collected first) and
compares :func:`pending_tasks` with it after the run: ``pending_tasks() <= before``.

The same garbage can warn when it is finalised (``ResourceWarning: unclosed transport``). A
test that records or raises its warnings, and collects its own garbage to see them, opens
that window with :func:`warnings_of_this_test`, which collects the earlier garbage first.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import warnings
from collections.abc import Iterator
from typing import Literal

import anyio.lowlevel


def collect_earlier_garbage() -> None:
    """Collects what earlier tests left, so that its finalisers do not run inside this test's readings.

    What those finalisers warn is shown in pytest's warnings summary, not raised: it is not the
    fault of the test that happens to be running when the collector finds it.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        gc.collect()


def pending_tasks() -> set[asyncio.Task[object]]:
    """The unfinished tasks of the running loop besides the caller's own."""
    current = asyncio.current_task()
    return {t for t in asyncio.all_tasks() if t is not current and not t.done()}


async def finish_generator_closes(before: set[asyncio.Task[object]], timeout_s: float = 60.0) -> None:
    """Wait for the loop's closing of dropped async generators started since ``before`` was read.

    asyncio closes an async generator that was dropped unfinished (an SDK's stream iterator
    left to the collector) in a task of its own running its ``aclose()``; one that awaits (a
    response closing its connection) needs more than one turn of the loop. Only those tasks are
    waited for, so a task a run left running is still found by ``pending_tasks() <= before``;
    ``timeout_s`` only makes a close that never ends fail the test instead of hanging it.
    """
    with anyio.fail_after(timeout_s):
        while closes := {t for t in pending_tasks() - before if "async_generator_athrow" in repr(t.get_coro())}:
            await asyncio.gather(*closes, return_exceptions=True)


async def settled_tasks() -> set[asyncio.Task[object]]:
    """:func:`pending_tasks` once earlier tests' garbage (and its cleanup tasks) is collected."""
    collect_earlier_garbage()
    await anyio.lowlevel.checkpoint()
    return pending_tasks()


@contextlib.contextmanager
def warnings_of_this_test(action: Literal["always", "error"] = "always") -> Iterator[list[warnings.WarningMessage]]:
    """A window that records (``"always"``) or raises (``"error"``) every warning issued inside it.

    Earlier tests' garbage is collected before the window opens (:func:`collect_earlier_garbage`),
    so a ``gc.collect()`` inside it finalises only what the test itself left.

    Args:
        action: ``"always"`` records each warning in the list yielded; ``"error"`` raises it.

    Yields:
        The warnings recorded in the window (always empty with ``"error"``).
    """
    collect_earlier_garbage()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter(action)
        yield caught
