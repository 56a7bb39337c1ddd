"""A run cut during a ``repeatable`` tool's call resumes by calling it again, whatever the unknown-outcome policy.

A tool marked ``repeatable`` (a read) is harmless to call twice: a framework retry calls it
again rather than answer it from the attempt ledger. A crash (or a cancel) during such a call
leaves its outcome unknown in the journal; before the fix ``resume()`` applied the default
``on_unknown_tool_outcome="fail"`` to it as to a refund and stopped with ``ToolOutcomeUnknown``,
so a run cut while it read a balance could never finish. The same on DBOS, whose recovered
workflow applies the same policy. A call of a tool that is not repeatable keeps the policy
(``tests/test_seams_cancel_points.py``).
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from jeeves_router import Agent, Router, RouterRoute, tool
from jeeves_router.journal import JournalRuntime, current_idempotency_key
from jeeves_router.journal.base import Journal
from jeeves_router.models.base import ModelRequest
from jeeves_router.recovery import Recovery
from jeeves_router.testing import Call, FunctionModel, RecordedSleeps, Reply, StaticClassifier
from tests.journal_helpers import DeskModel, build_desk, run_then_fork_at_lookup
from tests.task_helpers import pending_tasks, settled_tasks, warnings_of_this_test
from tests.test_journal_surrogates import journals  # noqa: F401  (fixture)
from tests.test_seams_lifecycle import cancelled_once


def balance_desk(journal: Journal, reached: anyio.Event, keys: list[str | None]) -> Agent:
    """A desk whose billing agent reads a balance (repeatable; its first call stalls) and answers with it."""

    @tool(repeatable=True)
    async def get_balance(account: str) -> str:
        """Read an account's balance."""
        keys.append(current_idempotency_key())
        if len(keys) == 1:
            reached.set()
            await anyio.sleep(30)
        return f"{account}: 42 EUR"

    def answer(request: ModelRequest) -> Reply:
        last = request.messages[-1]
        if last.role == "tool":
            return Reply(text=f"Your balance is {last.parts[0].content}.")  # type: ignore[union-attr]
        return Reply(calls=[Call("get_balance", {"account": "A-1"})])

    billing = Agent("Billing.", name="billing", model=FunctionModel(answer, name="billing"), tools=[get_balance])
    router = Router(
        [RouterRoute("billing", billing)],
        classifier=StaticClassifier("billing"),
        recovery=Recovery(sleep=RecordedSleeps()),
    )
    return Agent("Desk", name="desk", runtime=JournalRuntime(journal), architecture=router)


@pytest.mark.anyio
@pytest.mark.parametrize("how", ["run", "stream"])
async def test_a_run_cut_during_a_repeatable_read_resumes_by_reading_again(
    journals: Callable[[], Journal],  # noqa: F811
    how: str,
) -> None:
    reached = anyio.Event()
    keys: list[str | None] = []
    agent = balance_desk(journals(), reached, keys)

    async def body() -> None:
        if how == "run":
            await agent.run("what is my balance?", session_id="s")
        else:
            async with agent.stream("what is my balance?", session_id="s") as events:
                async for _ in events:
                    pass

    before = await settled_tasks()
    with warnings_of_this_test("error"):
        scope = await cancelled_once(reached, body)
        gc.collect()
    assert scope.cancelled_caught and pending_tasks() <= before
    resumed = await balance_desk(journals(), anyio.Event(), keys).resume("s")
    assert (resumed.status, resumed.output) == ("ok", "Your balance is A-1: 42 EUR.")
    assert len(keys) == 2 and keys[0] is not None and keys[1] == keys[0]  # read again, under the call's own key


@pytest.mark.anyio
async def test_a_recovered_workflow_calls_a_repeatable_tool_again_under_the_fail_policy(tmp_path: Path) -> None:
    """A fork from the tool call keeps its start mark, not its result: the state a worker killed mid-call leaves."""
    from dbos import DBOS

    from jeeves_router.durable.dbos import DBOSRuntime, DurableAgents, _sqlite_timestamps_work, dbos_config

    if not _sqlite_timestamps_work():
        pytest.skip("DBOS cannot write a SQLite system database with this Python's SQLite")
    keys: list[str | None] = []

    @tool(repeatable=True)
    async def lookup_invoice(invoice: str) -> str:
        """Look up an invoice's payments."""
        keys.append(current_idempotency_key())
        return f"{invoice} was paid twice"

    desk = build_desk(DBOSRuntime(), DeskModel(), tool=lookup_invoice)  # the default policy, "fail"
    durable = DurableAgents([desk], workflow_name="jeeves_test.repeatable_unknown")
    DBOS(config=dbos_config("jeeves-sqlite-test", f"sqlite:///{tmp_path / 'dbos.sqlite'}", executor_id="solo"))
    try:
        _, result = await run_then_fork_at_lookup(durable)
        assert result.output == "Refund issued: INV-7 was paid twice."
        assert len(keys) == 2 and keys[0] is not None and keys[1] == keys[0]
    finally:
        DBOS.destroy(destroy_registry=True)
