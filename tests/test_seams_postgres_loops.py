"""Seams: one PostgresJournal used by several event loops (threads, ``asyncio.run`` in turn).

A model adapter keeps one HTTP client per event loop, so an agent run by two threads, each
running its own loop, works in both (README, "Model providers"). The same agent journaled in
PostgreSQL did not: the journal kept one connection and one ``anyio.Lock`` for every loop,
and two threads' runs at once hung for good (a waiter on one loop is never woken by a
release on another; the connection served two loops' queries). The journal now keeps a
connection and a lock per loop, and closes each connection when its loop shuts down.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import uuid
from collections.abc import Iterator

import pytest

from jeeves_router import Agent, Router, RouterRoute
from jeeves_router.journal import JournalRuntime, PostgresJournal
from jeeves_router.testing import FunctionModel, StaticClassifier
from tests.task_helpers import warnings_of_this_test

pytestmark = pytest.mark.postgres

GUARD_S = 60.0  # only so that a regression fails instead of hanging the suite
RUNS = 5


@pytest.fixture
def journal(pg_url: str) -> Iterator[PostgresJournal]:
    table = f"jeeves_test_{uuid.uuid4().hex[:12]}"
    yield PostgresJournal(pg_url, table=table)

    async def drop() -> None:
        async with PostgresJournal(pg_url, table=table) as j:
            await j._query(f"DROP TABLE IF EXISTS {table}", [])

    asyncio.run(drop())


def desk(journal: PostgresJournal) -> Agent:
    billing = Agent("Billing.", name="billing", model=FunctionModel(lambda r: r.messages[-1].text, name="b"))
    router = Router([RouterRoute("billing", billing)], classifier=StaticClassifier("billing"))
    return Agent("Desk", name="desk", architecture=router, runtime=JournalRuntime(journal))


def test_one_journaled_router_run_by_two_threads_at_once_answers_in_both(journal: PostgresJournal) -> None:
    agent = desk(journal)
    started = threading.Barrier(2)
    outputs: dict[int, list[object]] = {0: [], 1: []}

    def worker(n: int) -> None:
        async def main() -> None:
            started.wait(timeout=GUARD_S)  # both loops run before either writes
            for i in range(RUNS):
                try:
                    outputs[n].append((await agent.run(f"{n}-{i}", session_id=f"thread-{n}")).output)
                except Exception as exc:
                    outputs[n].append(exc)

        asyncio.run(main())

    with warnings_of_this_test() as caught:
        threads = [threading.Thread(target=worker, args=(n,), daemon=True) for n in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=GUARD_S)
        assert not any(t.is_alive() for t in threads), "a thread's run hung"
        gc.collect()
    assert outputs == {n: [f"{n}-{i}" for i in range(RUNS)] for n in range(2)}
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []  # each loop closed its own

    async def read() -> list[int]:
        async with journal:
            return [len(await journal.read(f"thread-{n}", types=("run.end",))) for n in range(2)]

    assert asyncio.run(read()) == [RUNS, RUNS]


def test_a_journaled_router_run_by_two_asyncio_runs_in_turn_leaves_no_connection_open(
    journal: PostgresJournal,
) -> None:
    agent = desk(journal)
    with warnings_of_this_test() as caught:
        first = asyncio.run(agent.run("one", session_id="s"))
        second = asyncio.run(agent.run("two", session_id="s"))
        gc.collect()
    assert (first.output, second.output) == ("one", "two")
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []
