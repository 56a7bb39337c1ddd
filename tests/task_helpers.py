"""What tests read to check that a run left no task running (not a test module).

Other libraries start tasks of their own that are not ours to judge: an ``openai`` or
``anthropic`` client an earlier test left open schedules its ``aclose()`` as a task when the
garbage collector finalises it, which can happen at any allocation of a later test. So a
test takes its reading with :func:`settled_tasks` (earlier garbage collected first) and
compares :func:`pending_tasks` with it after the run: ``pending_tasks() <= before``.
"""

from __future__ import annotations

import asyncio
import gc

import anyio.lowlevel


def pending_tasks() -> set[asyncio.Task[object]]:
    """The unfinished tasks of the running loop besides the caller's own."""
    current = asyncio.current_task()
    return {t for t in asyncio.all_tasks() if t is not current and not t.done()}


async def settled_tasks() -> set[asyncio.Task[object]]:
    """:func:`pending_tasks` once earlier tests' garbage (and its cleanup tasks) is collected."""
    gc.collect()
    await anyio.lowlevel.checkpoint()
    return pending_tasks()
