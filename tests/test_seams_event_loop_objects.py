"""Seams: one object used by several event loops (two threads each running one, two ``asyncio.run`` in turn).

A lock, an event or a connection belongs to the event loop that made it: an anyio lock wakes
its next waiter through the releaser's loop, so a waiter of another thread's loop is never
woken and waits for good. The model adapters and ``PostgresJournal`` keep one of each per
loop (tests/test_models_event_loops.py, tests/test_seams_postgres_loops.py); here the other
objects that hold such things are probed the same way:

- ``LlamaCppModel`` held one ``anyio.Lock`` for every loop: a second thread's call hung behind
  the first. Its lock is now shared by every loop and thread (``_loops.SharedLock``): still
  one generation at a time, and a waiter of any loop is woken.
- ``MCPServer`` kept one connection and one condition for every loop: a run in a second thread
  joined the connection the first thread's loop had open, and both hung. Each loop now opens
  a connection of its own.
- ``SQLiteJournal`` (a ``threading.Lock``, its queries in worker threads) and the served app
  (nothing of a loop's kept on it) held as they were, but for the app's run slots: its
  ``Slots`` counter read and wrote its count without a lock, so two servers (threads) could
  both take the last slot. It now takes a ``threading.Lock``.

Every wait is bounded by ``anyio.fail_after(GUARD_S)``, only so that a regression fails
instead of hanging the suite.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
import uuid
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest

from jeeves_router import Agent
from jeeves_router._slots import Slots
from jeeves_router.journal import JournalRuntime, MemoryJournal, SQLiteJournal
from jeeves_router.messages import user
from jeeves_router.models.base import ModelRequest, ModelResponse
from jeeves_router.serve import create_app
from jeeves_router.testing import Call, FunctionModel, ScriptedModel
from tests.llama_stub import StubLlama
from tests.serve_apps import build_desk, running

GUARD_S = 60.0
T = TypeVar("T")


def guarded(fn: Callable[[], Coroutine[Any, Any, T]]) -> Callable[[], Coroutine[Any, Any, T]]:
    async def within() -> T:
        with anyio.fail_after(GUARD_S):
            return await fn()

    return within


def in_threads(*mains: Callable[[], Coroutine[Any, Any, object]]) -> list[object]:
    """Run each coroutine function in a thread of its own, each with its own event loop; their results or errors."""
    out: list[object] = [None] * len(mains)

    def worker(n: int) -> None:
        try:
            out[n] = asyncio.run(guarded(mains[n])())
        except BaseException as exc:  # the test reads it
            out[n] = exc

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(len(mains))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=GUARD_S * 2)
    return out


# -- LlamaCppModel ---------------------------------------------------------------------------


@pytest.fixture
def llama_model() -> Callable[[StubLlama], Any]:
    pytest.importorskip("llama_cpp")
    from jeeves_router.models.llamacpp import LlamaCppModel

    return lambda stub: LlamaCppModel("stub.gguf", llama=stub)


REQUEST = ModelRequest(messages=(user("hi"),))


def test_a_llamacpp_model_answers_two_asyncio_runs_in_turn(llama_model: Callable[[StubLlama], Any]) -> None:
    model = llama_model(StubLlama())
    for _ in range(2):
        response = asyncio.run(guarded(lambda: model.request(REQUEST))())
        assert response.text == "hello world"


def test_a_llamacpp_model_called_by_two_threads_answers_both_one_at_a_time(
    llama_model: Callable[[StubLlama], Any],
) -> None:
    gate = threading.Event()
    stub = StubLlama(gate)
    model = llama_model(stub)
    waiting = threading.Event()

    async def first() -> ModelResponse:
        return await model.request(REQUEST)  # type: ignore[no-any-return]

    async def second() -> ModelResponse:
        assert stub.generating.wait(GUARD_S)  # the first thread holds the model
        waiting.set()
        return await model.request(REQUEST)  # type: ignore[no-any-return]

    def release_when_the_second_waits() -> None:
        waiting.wait(GUARD_S)
        time.sleep(0.2)  # lets it reach the lock (had it not, the test would pass without probing it)
        gate.set()

    opener = threading.Thread(target=release_when_the_second_waits)
    opener.start()
    out = in_threads(first, second)
    opener.join()
    assert [getattr(r, "text", r) for r in out] == ["hello world", "hello world"]
    assert not stub.overlapped  # one llama.cpp context: never two generations at once


def test_a_wait_for_a_llamacpp_model_given_up_leaves_it_free(llama_model: Callable[[StubLlama], Any]) -> None:
    gate = threading.Event()
    stub = StubLlama(gate)
    model = llama_model(stub)

    async def holder() -> ModelResponse:
        return await model.request(REQUEST)  # type: ignore[no-any-return]

    async def gives_up() -> str:
        assert stub.generating.wait(GUARD_S)
        with anyio.move_on_after(0.2):  # cancelled while the other thread's call holds the model
            await model.request(REQUEST)
            return "answered"
        gate.set()
        return "gave up"

    out = in_threads(holder, gives_up)
    assert [getattr(r, "text", r) for r in out] == ["hello world", "gave up"]
    stub.gate = None
    response = asyncio.run(guarded(lambda: model.request(REQUEST))())  # not left held by the given-up wait
    assert response.text == "hello world"


# -- MCP client ------------------------------------------------------------------------------


@pytest.fixture
def toolbox() -> Any:
    pytest.importorskip("mcp")
    from jeeves_router.mcp import MCPServerStdio
    from tests.mcp_helpers import ENV, TOOLBOX

    return MCPServerStdio(sys.executable, [TOOLBOX], env=ENV, name="toolbox", timeout=GUARD_S, connect_timeout=GUARD_S)


def adding_agent(server: Any) -> Agent:
    return Agent(
        "You add.", name="adder", model=ScriptedModel([Call("add", {"a": 2, "b": 40}), "Done."]), tools=[server]
    )


def test_an_mcp_server_serves_two_asyncio_runs_in_turn(toolbox: Any) -> None:
    async def main() -> tuple[str, str | None]:
        result = await adding_agent(toolbox).run("add")
        return result.status, result.output

    assert [asyncio.run(guarded(main)()) for _ in range(2)] == [("ok", "Done.")] * 2


def test_an_mcp_server_held_open_by_one_thread_serves_a_run_of_another(toolbox: Any) -> None:
    opened, second_done = threading.Event(), threading.Event()

    async def holds_it_open() -> list[str]:
        async with toolbox:
            opened.set()
            await anyio.to_thread.run_sync(second_done.wait, GUARD_S)
            return [t.name for t in toolbox.tools]

    async def runs_in_another_thread() -> tuple[str, str | None]:
        try:
            await anyio.to_thread.run_sync(opened.wait, GUARD_S)
            result = await adding_agent(toolbox).run("add")
            return result.status, result.output
        finally:
            second_done.set()

    held, ran = in_threads(holds_it_open, runs_in_another_thread)
    assert ran == ("ok", "Done.")
    assert isinstance(held, list) and "add" in held
    assert not toolbox.is_open


# -- SQLiteJournal, the served app -------------------------------------------------------------


def journaled_agent(journal: SQLiteJournal) -> Agent:
    return Agent("You answer.", name="a", model=FunctionModel(lambda _: "fine"), runtime=JournalRuntime(journal))


def test_a_sqlite_journal_records_the_runs_of_two_threads_and_of_two_asyncio_runs(tmp_path: Path) -> None:
    journal = SQLiteJournal(tmp_path / "j.db")
    agent = journaled_agent(journal)

    async def three_runs() -> list[str | None]:
        return [(await agent.run("hi", session_id=uuid.uuid4().hex)).output for _ in range(3)]

    out = in_threads(three_runs, three_runs)
    out += [asyncio.run(guarded(three_runs)()) for _ in range(2)]
    assert out == [["fine"] * 3] * 4
    sessions = asyncio.run(guarded(journal.sessions)())
    assert len(sessions) == 12
    journal.close()


def test_one_served_app_answers_on_two_servers_at_once_and_in_turn(tmp_path: Path) -> None:
    import openai

    app = create_app(build_desk(latency_s=0.3), journal=MemoryJournal())  # slow: requests to both are in flight at once

    def ask(url: str) -> str | None:
        with openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=GUARD_S) as client:
            reply = client.chat.completions.create(model="desk", messages=[{"role": "user", "content": "refund me"}])
            return reply.choices[0].message.content

    with running(app) as one, running(app) as two, ThreadPoolExecutor(4) as pool:
        at_once = list(pool.map(ask, [one.url, two.url, one.url, two.url]))
    with running(app) as again:
        in_turn = ask(again.url)
    assert len(set(at_once)) == 1 and at_once[0] and "[billing]" in at_once[0]
    assert in_turn == at_once[0]


class _Interleaved(Slots):
    """A limit of one slot whose first read of its count, in ``acquire``, lets another thread take a slot first.

    That is the moment two servers of one app (two threads) can both see the last slot free.
    Without a lock the other thread takes the slot now, and this read's value is stale; with
    one, the other thread waits for the lock (the wait for it here gives up after a while).
    """

    def __init__(self) -> None:
        self._count = 0
        self.other: threading.Thread | None = None
        super().__init__(1)

    @property  # type: ignore[override]
    def in_flight(self) -> int:
        seen, other, self.other = self._count, self.other, None
        if other is not None:
            other.start()
            other.join(2)  # bounded: with a lock, the other thread waits for this one's acquire to end
        return seen

    @in_flight.setter
    def in_flight(self, value: int) -> None:
        self._count = value


def test_two_servers_of_one_app_cannot_both_take_its_last_run_slot() -> None:
    slots = _Interleaved()
    outcomes: list[str] = []

    def take() -> None:
        outcomes.append("slot" if slots.acquire() else "refused")

    other = slots.other = threading.Thread(target=take)
    take()  # this thread's acquire starts the other one's in its middle
    other.join(GUARD_S)
    assert not other.is_alive()
    assert sorted(outcomes) == ["refused", "slot"] and slots._count == 1  # without a lock: ["slot", "slot"], 2
    slots.release()
    assert slots._count == 0
