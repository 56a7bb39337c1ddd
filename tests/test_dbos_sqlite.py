"""DBOSRuntime in one process on a SQLite system database (no server needed)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from jeeves_router.errors import UsageError
from jeeves_router.testing import ScriptedModel
from jeeves_router.tools import Tool, ToolContext, ToolOutcome, tool
from tests.journal_helpers import PROMPT, DeskModel, build_desk, run_then_fork_at_lookup


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def dbos_app(tmp_path: Path) -> Iterator[str]:
    from dbos import DBOS

    yield f"sqlite:///{tmp_path / 'dbos.sqlite'}"
    DBOS.destroy(destroy_registry=True)


@pytest.mark.anyio
async def test_a_routed_run_is_a_workflow_of_checkpointed_steps(dbos_app: str) -> None:
    from dbos import DBOS

    from jeeves_router.durable.dbos import DBOSRuntime, DurableAgents, _sqlite_timestamps_work, dbos_config

    model = DeskModel()
    durable = DurableAgents([build_desk(DBOSRuntime(), model)], workflow_name="jeeves_test.sqlite_run")
    if not _sqlite_timestamps_work():  # Python >= 3.12 linked against SQLite < 3.42 (Debian 12's 3.40)
        with pytest.raises(UsageError, match=r"SQLite 3\.42"):  # refused up front, not at the first enqueue
            dbos_config("jeeves-sqlite-test", dbos_app, executor_id="solo")
        return
    DBOS(config=dbos_config("jeeves-sqlite-test", dbos_app, executor_id="solo"))
    DBOS.launch()
    await durable.register_queue(polling_interval_sec=0.1)
    wid = await durable.enqueue(PROMPT, session_id="q1", workflow_id="wf-1")
    result = await durable.result(wid)
    assert result.output == "Refund issued: INV-7 was paid twice." and result.route == "billing"
    steps = await DBOS.list_workflow_steps_async(wid)
    names = ["classify", "model", "tool:lookup_invoice.started", "tool:lookup_invoice", "model"]
    assert [s["function_name"] for s in steps] == names
    assert model.calls == ["classify:INV-7", "INV-7:1", "INV-7:2"]

    # outside a workflow the same agent runs directly, nothing checkpointed
    plain = await durable.agents["desk"].run(PROMPT, session_id="direct")
    assert plain.output == result.output


def test_durable_agents_need_the_dbos_runtime() -> None:
    from jeeves_router.durable.dbos import DurableAgents

    with pytest.raises(UsageError, match="DBOSRuntime"):
        DurableAgents([build_desk(None, ScriptedModel([]))])


def test_a_sqlite_system_database_dbos_cannot_stamp_is_refused_up_front(monkeypatch: pytest.MonkeyPatch) -> None:
    """DBOS stamps rows with unixepoch('subsec') on Python 3.12+: SQLite older than 3.42 gives NULL."""
    from jeeves_router.durable import dbos as durable_dbos

    monkeypatch.setattr(durable_dbos, "_sqlite_timestamps_work", lambda: False)
    for make in (
        lambda url: durable_dbos.dbos_config("app", url, executor_id="w1"),
        lambda url: durable_dbos.dbos_client(url),
    ):
        with pytest.raises(UsageError, match=r"SQLite .* needs SQLite 3\.42 or later; use a PostgreSQL"):
            make("sqlite:///runs.db")
    config = durable_dbos.dbos_config("app", "postgresql://u@127.0.0.1:1/db", executor_id="w1")
    assert config["system_database_url"] == "postgresql://u@127.0.0.1:1/db"  # PostgreSQL is not concerned


def test_the_probe_asks_sqlite_what_dbos_writes() -> None:
    import sqlite3
    import sys

    from jeeves_router.durable.dbos import _sqlite_timestamps_work

    expected = sys.version_info < (3, 12) or sqlite3.sqlite_version_info >= (3, 42)
    assert _sqlite_timestamps_work() is expected


@pytest.mark.parametrize("policy", ["retry", "skip"])
@pytest.mark.anyio
async def test_a_tool_call_started_and_never_checkpointed_follows_the_policy(dbos_app: str, policy: str) -> None:
    """A fork from the tool call keeps its start mark, not its result: the state a worker killed mid-call leaves."""
    from dbos import DBOS

    from jeeves_router.durable.dbos import DBOSRuntime, DurableAgents, _sqlite_timestamps_work, dbos_config
    from jeeves_router.runtime import current_idempotency_key

    if not _sqlite_timestamps_work():
        pytest.skip("DBOS cannot write a SQLite system database with this Python's SQLite")
    keys: list[str | None] = []

    @tool
    async def lookup_invoice(invoice: str) -> str:
        """Look up an invoice's payments."""
        keys.append(current_idempotency_key())
        return f"{invoice} was paid twice"

    desk = build_desk(DBOSRuntime(on_unknown_tool_outcome=policy), DeskModel(), tool=lookup_invoice)  # type: ignore[arg-type]
    durable = DurableAgents([desk], workflow_name=f"jeeves_test.unknown_{policy}")
    DBOS(config=dbos_config("jeeves-sqlite-test", dbos_app, executor_id="solo"))
    wid, result = await run_then_fork_at_lookup(durable)
    if policy == "retry":  # called again, with the call's own key: the fork is the run again
        assert len(keys) == 2 and keys[1] == keys[0]
        assert keys[0] is not None and keys[0].startswith(f"dbos:{wid}:q1__route_billing:1:")
        assert result.output == "Refund issued: INV-7 was paid twice."
    else:  # not called again; the model is told
        assert len(keys) == 1
        assert result.output is not None and "outcome of this lookup_invoice call is unknown" in result.output


@pytest.mark.anyio
async def test_a_fork_that_calls_a_tool_again_gives_it_the_original_call_s_idempotency_key(dbos_app: str) -> None:
    """A fork from before the call runs it again (DBOS re-executes from the fork's step): a refund's key stays.

    The key names the workflow the forks come from, the step and its input, so the remote system
    that honours it makes the repeated refund once; a call with other input gets a key of its own.
    """
    from dbos import DBOS

    from jeeves_router.durable.dbos import DBOSRuntime, DurableAgents, dbos_config
    from jeeves_router.runtime import current_idempotency_key

    refunds: dict[str | None, list[str]] = {}

    @tool
    async def lookup_invoice(invoice: str) -> str:
        """Refund an invoice's second payment (keyed: the payment system makes one refund per key)."""
        refunds.setdefault(current_idempotency_key(), []).append(invoice)
        return f"{invoice} was paid twice"

    desk = build_desk(DBOSRuntime(), DeskModel(), tool=lookup_invoice)  # type: ignore[arg-type]
    durable = DurableAgents([desk], workflow_name="jeeves_test.fork_keys")
    DBOS(config=dbos_config("jeeves-sqlite-test", dbos_app, executor_id="solo"))
    DBOS.launch()
    await durable.register_queue(polling_interval_sec=0.1)
    wid = await durable.enqueue(PROMPT, session_id="q1", workflow_id="wf-1")
    first = await durable.result(wid)
    steps = await DBOS.list_workflow_steps_async(wid)
    mark = next(s["function_id"] for s in steps if s["function_name"] == "tool:lookup_invoice.started")
    forked = await DBOS.fork_workflow_async(wid, mark)  # from the start mark: the call is made again
    assert (await durable.result(forked.workflow_id)).output == first.output
    again = await DBOS.fork_workflow_async(forked.workflow_id, mark)  # a fork of the fork, likewise
    assert (await durable.result(again.workflow_id)).output == first.output
    assert len(refunds) == 1, refunds  # three calls, one key: one refund
    [(key, invoices)] = refunds.items()
    assert invoices == ["INV-7"] * 3 and key is not None and key.startswith("dbos:wf-1:q1__route_billing:1:")

    other = await durable.enqueue(PROMPT.replace("INV-7", "INV-8"), session_id="q1", workflow_id="wf-2")
    await durable.result(other)
    assert len(refunds) == 2  # another run's call (and another invoice): another key


@pytest.mark.anyio
async def test_a_failed_run_is_read_back_with_its_own_error_type(dbos_app: str) -> None:
    from dbos import DBOS

    from jeeves_router.durable.dbos import DBOSRuntime, DurableAgents, _sqlite_timestamps_work, dbos_config
    from jeeves_router.errors import ToolOutcomeUnknown

    if not _sqlite_timestamps_work():
        pytest.skip("DBOS cannot write a SQLite system database with this Python's SQLite")

    class Unanswered(Tool):  # as an MCP tool whose server had the call and never answered
        async def call(self, arguments: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
            raise ToolOutcomeUnknown(f"the billing server had the {arguments['invoice']} call and did not answer")

    async def lookup_invoice(invoice: str) -> str:
        """Look up an invoice's payments."""
        return invoice

    desk = build_desk(DBOSRuntime(), DeskModel(), tool=Unanswered(lookup_invoice))
    durable = DurableAgents([desk], workflow_name="jeeves_test.failed_run")
    DBOS(config=dbos_config("jeeves-sqlite-test", dbos_app, executor_id="solo"))
    DBOS.launch()
    await durable.register_queue(polling_interval_sec=0.1)
    wid = await durable.enqueue(PROMPT, session_id="q1", workflow_id="wf-1")
    with pytest.raises(ToolOutcomeUnknown, match="had the INV-7 call and did not answer"):
        await durable.result(wid)


def test_the_dbos_runtime_refuses_an_unknown_policy() -> None:
    from jeeves_router.durable.dbos import DBOSRuntime

    with pytest.raises(UsageError, match="on_unknown_tool_outcome must be"):
        DBOSRuntime(on_unknown_tool_outcome="again")  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_an_idempotency_key_or_a_resume_under_dbos_is_refused_with_what_dbos_offers() -> None:
    """DBOS checkpoints runs but keys them by workflow id: the refusal names that, not a journal to build."""
    from jeeves_router.durable.dbos import DBOSRuntime

    desk = build_desk(DBOSRuntime(), DeskModel())
    with pytest.raises(UsageError, match=r"DBOSRuntime keys .* workflow_id=key") as keyed:
        await desk.run(PROMPT, idempotency_key="refund-INV-7")
    with pytest.raises(UsageError, match=r"executor_id") as resumed:
        await desk.resume("s-1")
    for refused in (keyed, resumed):
        assert "JournalRuntime" not in str(refused.value) and "does not journal" not in str(refused.value)


@pytest.mark.anyio
async def test_a_recovered_workflow_decides_on_a_checkpointed_failure_as_the_run_did(dbos_app: str) -> None:
    """A failed step comes back with its type and severity, not as DBOS's PortableWorkflowError."""
    from dbos import DBOS

    from jeeves_router import Agent
    from jeeves_router.architectures.react import ToolLoop
    from jeeves_router.durable.dbos import DBOSRuntime, DurableAgents, _sqlite_timestamps_work, dbos_config
    from jeeves_router.errors import ModelError
    from jeeves_router.recovery import Recovery
    from jeeves_router.testing import Chunks, RecordedSleeps, Reply
    from jeeves_router.usage import Usage

    if not _sqlite_timestamps_work():
        pytest.skip("DBOS cannot write a SQLite system database with this Python's SQLite")
    overloaded = ModelError("HTTP 503 overloaded", severity="retriable", status_code=503)
    model = ScriptedModel(
        [Reply(Chunks("Refund ", "iss"), error=overloaded), Reply("Refund issued.", usage=Usage(30, 8, 0, 1, 0.0))]
    )
    sleeps = RecordedSleeps()
    agent = Agent(
        "Billing.",
        name="billing",
        model=model,
        architecture=ToolLoop(recovery=Recovery(sleep=sleeps)),
        runtime=DBOSRuntime(),
    )
    durable = DurableAgents([agent], workflow_name="jeeves_test.replayed_failure")
    DBOS(config=dbos_config("jeeves-sqlite-test", dbos_app, executor_id="solo"))
    DBOS.launch()
    await durable.register_queue(polling_interval_sec=0.1)
    wid = await durable.enqueue("refund INV-7", session_id="q1", workflow_id="wf-1")
    run = await durable.result(wid)
    assert (run.status, run.output, len(sleeps.delays)) == ("ok", "Refund issued.", 1)  # retried once
    steps = await DBOS.list_workflow_steps_async(wid)
    replay = await DBOS.fork_workflow_async(wid, len(steps) + 1)  # every step checkpointed: a pure replay
    recovered = await durable.result(replay.workflow_id)
    assert (recovered.status, recovered.output, recovered.usage) == (run.status, run.output, run.usage)
    assert recovered.usage_by_route == run.usage_by_route and recovered.report == run.report
    assert len(sleeps.delays) == 1  # the replayed failure waits no backoff again
