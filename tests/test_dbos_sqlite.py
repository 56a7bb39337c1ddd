"""DBOSRuntime in one process on a SQLite system database (no server needed)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from jeeves_router.errors import UsageError
from jeeves_router.testing import ScriptedModel
from tests.journal_helpers import PROMPT, DeskModel, build_desk


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

    from jeeves_router.durable.dbos import DBOSRuntime, DurableAgents, dbos_config

    model = DeskModel()
    durable = DurableAgents([build_desk(DBOSRuntime(), model)], workflow_name="jeeves_test.sqlite_run")
    DBOS(config=dbos_config("jeeves-sqlite-test", dbos_app, executor_id="solo"))
    DBOS.launch()
    await durable.register_queue(polling_interval_sec=0.1)
    wid = await durable.enqueue(PROMPT, session_id="q1", workflow_id="wf-1")
    result = await durable.result(wid)
    assert result.output == "Refund issued: INV-7 was paid twice." and result.route == "billing"
    steps = await DBOS.list_workflow_steps_async(wid)
    assert [s["function_name"] for s in steps] == ["classify", "model", "tool:lookup_invoice", "model"]
    assert model.calls == ["classify:INV-7", "INV-7:1", "INV-7:2"]

    # outside a workflow the same agent runs directly, nothing checkpointed
    plain = await durable.agents["desk"].run(PROMPT, session_id="direct")
    assert plain.output == result.output


def test_durable_agents_need_the_dbos_runtime() -> None:
    from jeeves_router.durable.dbos import DurableAgents

    with pytest.raises(UsageError, match="DBOSRuntime"):
        DurableAgents([build_desk(None, ScriptedModel([]))])
