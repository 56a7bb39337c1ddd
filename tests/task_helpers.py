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
