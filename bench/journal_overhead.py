"""Cost of journaling one routed run (router + tool call + streamed answer, fake models).

Prints the median per run, over N runs, for: no runtime, MemoryJournal, SQLiteJournal
(recording), SQLiteJournal (replaying), and 100 concurrent sessions on one SQLite file.

    PYTHONPATH=. python bench/journal_overhead.py [N]
"""

from __future__ import annotations

import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _cli import runs_arg

RUNS = runs_arg(__doc__) if __name__ == "__main__" else 200

from jeeves_router import Agent
from jeeves_router.journal import JournalRuntime, MemoryJournal, SQLiteJournal
from tests.journal_helpers import DeskModel, build_desk

logging.basicConfig(level=logging.WARNING)


async def timed(desk: Agent, n: int, prefix: str) -> list[float]:
    out = []
    for i in range(n):
        t = time.perf_counter()
        await desk.run(f"charged twice for INV-{i}", session_id=f"{prefix}{i}")
        out.append(time.perf_counter() - t)
    return out


async def main(n: int) -> None:
    tmp = Path(tempfile.mkdtemp())
    base = statistics.median(await timed(build_desk(None, DeskModel()), n, "p"))
    mem = statistics.median(await timed(build_desk(JournalRuntime(MemoryJournal()), DeskModel()), n, "m"))
    journal = SQLiteJournal(tmp / "j.db")
    rec = statistics.median(await timed(build_desk(JournalRuntime(journal), DeskModel()), n, "s"))
    rep = statistics.median(await timed(build_desk(JournalRuntime(journal), DeskModel()), n, "s"))
    for name, v in [("no runtime", base), ("MemoryJournal", mem), ("SQLite record", rec), ("SQLite replay", rep)]:
        print(f"{name:<16} {v * 1000:7.2f} ms/run   x{v / base:5.1f}")
    desk = build_desk(JournalRuntime(SQLiteJournal(tmp / "c.db")), DeskModel())

    async def one(i: int) -> None:
        await desk.run(f"charged twice for INV-{i}", session_id=f"c{i}")

    t = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for i in range(100):
            tg.start_soon(one, i)
    wall = time.perf_counter() - t
    print(f"100 concurrent sessions, one SQLite file: {wall * 1000:.0f} ms wall ({wall * 10:.2f} ms/run)")


if __name__ == "__main__":
    anyio.run(main, RUNS)
