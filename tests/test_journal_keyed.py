"""Runs named by a client's idempotency key (``jeeves_router.journal.keyed``), below the server.

Two runtimes on one journal stand for two processes; a journal that holds both first reads
of a run until each has made it forces the race the claims must settle.
"""

from __future__ import annotations

from collections.abc import Collection

import anyio
import pytest

from jeeves_router import Agent
from jeeves_router.errors import ReplayDivergence, UsageError
from jeeves_router.journal import IdempotencyConflict, JournalRuntime, MemoryJournal, RunInFlight, SessionHistory
from jeeves_router.journal.records import Entry
from jeeves_router.messages import ToolResultPart
from jeeves_router.models.base import ModelRequest
from jeeves_router.testing import Call, FunctionModel, Reply
from jeeves_router.tools import tool

pytestmark = pytest.mark.anyio


class RacingJournal(MemoryJournal):
    """Holds the first read of every run until ``readers`` reads of it were made: both find it empty."""

    def __init__(self, readers: int = 2) -> None:
        super().__init__()
        self.readers = readers
        self.waiting: dict[str, list[anyio.Event]] = {}

    async def read(
        self, session_id: str, *, run_id: str | None = None, types: Collection[str] | None = None
    ) -> list[Entry]:
        found = await super().read(session_id, run_id=run_id, types=types)
        if run_id is not None and types is None:  # a keyed request's first look at its run
            queue = self.waiting.setdefault(run_id, [])
            if len(queue) < self.readers:
                done = anyio.Event()
                queue.append(done)
                if len(queue) == self.readers:
                    for e in queue:
                        e.set()
                await done.wait()
        return found


def agent(journal: MemoryJournal, calls: list[str], release: anyio.Event | None = None, **runtime: object) -> Agent:
    """A clerk whose answer waits for ``release`` (when given)."""

    async def answer(request: ModelRequest) -> str:
        calls.append(request.messages[-1].text)
        if release is not None:
            await release.wait()
        return f"done: {request.messages[-1].text} ({len(request.messages) - 1} earlier)"

    return Agent("x", name="clerk", model=FunctionModel(answer), runtime=JournalRuntime(journal, **runtime))  # type: ignore[arg-type]


async def race(first: Agent, second: Agent, prompts: tuple[str, str], release: anyio.Event) -> list[object]:
    """Run both with one key at once; a refused one releases the other's answer."""
    outcomes: list[object] = [None, None]

    async def one(i: int, a: Agent) -> None:
        try:
            outcomes[i] = await a.run(prompts[i], idempotency_key="k-1")
        except (RunInFlight, IdempotencyConflict) as exc:
            outcomes[i] = exc
            release.set()

    with anyio.fail_after(30):  # a guard against a hang (both answers waiting), not a timing
        async with anyio.create_task_group() as tg:
            tg.start_soon(one, 0, first)
            tg.start_soon(one, 1, second)
    return outcomes


async def test_two_processes_that_both_find_no_run_start_it_once() -> None:
    journal, calls, release = RacingJournal(), [], anyio.Event()
    first, second = agent(journal, calls, release), agent(journal, calls, release)
    outcomes = await race(first, second, ("refund", "refund"), release)
    assert calls == ["refund"]
    assert sorted(type(o).__name__ for o in outcomes) == ["RunInFlight", "RunResult"]


async def test_two_processes_racing_with_two_requests_for_one_key_one_runs_the_other_conflicts() -> None:
    journal, calls, release = RacingJournal(), [], anyio.Event()
    first, second = agent(journal, calls, release), agent(journal, calls, release)
    outcomes = await race(first, second, ("refund", "refund twice"), release)
    assert len(calls) == 1
    assert sorted(type(o).__name__ for o in outcomes) == ["IdempotencyConflict", "RunResult"]


async def test_two_replays_of_a_completed_run_at_once_both_answer_without_a_call() -> None:
    journal, calls = RacingJournal(readers=1), []  # the first run: nothing to race with
    await agent(journal, calls).run("refund", idempotency_key="k-1")
    journal.readers, journal.waiting = 2, {}
    outcomes = await race(agent(journal, calls), agent(journal, calls), ("refund", "refund"), anyio.Event())
    assert calls == ["refund"]
    assert [getattr(o, "output", o) for o in outcomes] == ["done: refund (0 earlier)"] * 2


async def test_a_run_that_failed_in_another_process_is_resumed_at_once_not_in_flight() -> None:
    journal, calls = MemoryJournal(), []

    def fails(request: ModelRequest) -> str:
        raise ConnectionError("the model's connection dropped")

    failing = Agent("x", name="clerk", model=FunctionModel(fails), runtime=JournalRuntime(journal))
    with pytest.raises(ConnectionError):
        await failing.run("refund", idempotency_key="k-4")
    # its attempt ended (run.end failed) a moment ago: another process resumes it, no in_flight_s wait
    resumed = await agent(journal, calls).run("refund", idempotency_key="k-4")
    assert resumed.output == "done: refund (0 earlier)" and calls == ["refund"]


async def test_a_retry_of_a_completed_run_under_a_changed_agent_runs_nothing_again() -> None:
    # A deploy changed the clerk's instructions between a request and its retry: the completed
    # run cannot be replayed step by step, and it must not run again (a second refund).
    journal, refunds = MemoryJournal(), []

    @tool
    def refund(invoice: str) -> str:
        """Refund an invoice."""
        refunds.append(invoice)
        return "refunded"

    def answer(request: ModelRequest) -> Reply:
        if not any(isinstance(p, ToolResultPart) for m in request.messages for p in m.parts):
            return Reply(calls=(Call("refund", {"invoice": "INV-1"}),))
        return Reply(text="refunded INV-1")

    model = FunctionModel(answer, name="clerk-model")

    def clerk(instructions: str) -> Agent:
        return Agent(instructions, name="clerk", model=model, tools=[refund], runtime=JournalRuntime(journal))

    first = await clerk("You refund.").run("refund INV-1", idempotency_key="k-5")
    calls = len(model.requests)
    with pytest.raises(ReplayDivergence, match="new key"):
        await clerk("You refund invoices, politely.").run("refund INV-1", idempotency_key="k-5")
    assert first.output == "refunded INV-1" and refunds == ["INV-1"]
    assert len(model.requests) == calls  # the changed clerk's model was not called either


async def test_a_retry_sees_the_history_its_run_was_given_not_the_session_it_grew() -> None:
    journal, calls = MemoryJournal(), []
    clerk = agent(journal, calls, session_history=SessionHistory())
    await clerk.run("hello", session_id="s-1")
    first = await clerk.run("refund", session_id="s-1", idempotency_key="k-2")
    again = await clerk.run("refund", session_id="s-1", idempotency_key="k-2")  # the session now holds it too
    assert first.output == again.output == "done: refund (2 earlier)"
    assert calls == ["hello", "refund"]


async def test_a_key_needs_a_journaling_runtime_and_printable_ascii() -> None:
    plain = Agent("x", name="clerk", model=FunctionModel(lambda r: "hi"))
    with pytest.raises(UsageError, match="does not journal"):
        await plain.run("refund", idempotency_key="k-3")
    with pytest.raises(UsageError, match="printable ASCII"):
        await agent(MemoryJournal(), []).run("refund", idempotency_key="caf\u00e9")


async def test_a_stream_says_whether_it_replays_a_completed_run() -> None:
    calls: list[str] = []
    clerk = agent(MemoryJournal(), calls)
    replayed = []
    for key in ("k-1", "k-1", "k-2"):
        async with clerk.stream("refund", idempotency_key=key) as stream:
            async for _ in stream:
                replayed.append(stream.replayed)  # known from the first event on
                break
            async for _ in stream:
                pass
    assert replayed == [False, True, False]
    assert calls == ["refund", "refund"]  # k-1 once, k-2 once
