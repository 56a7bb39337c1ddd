"""Recovery(expose_details=...) on DBOS: what DBOS's system database keeps of an exception's text.

DBOS stores a failed workflow's error (its type's name and its message) in its own database;
the run's exception is what the workflow raises, so the library decides what it says there as
the journal's ``run.end`` record does (:mod:`jeeves_router._shown`). SQLite system database, one
process: no server needed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jeeves_router import Agent
from jeeves_router.architectures.react import ToolLoop
from jeeves_router.recovery import Recovery
from jeeves_router.testing import RecordedSleeps, ScriptedModel

SECRET = "sk-live-4242424242424242"


async def failed_run(url: str, name: str, recovery: Recovery | None) -> Exception:
    """A billing run on DBOS whose model call fails quoting ``SECRET``: the error ``result`` raises."""
    from dbos import DBOS

    from jeeves_router.durable.dbos import DBOSRuntime, DurableAgents, dbos_config

    model = ScriptedModel([ValueError(f"card rejected by https://pay.example/charge?key={SECRET}")] * 3)
    architecture = ToolLoop(recovery=recovery) if recovery is not None else ToolLoop()
    agent = Agent("Billing.", name="billing", model=model, architecture=architecture, runtime=DBOSRuntime())
    durable = DurableAgents([agent], workflow_name=name)
    DBOS(config=dbos_config("jeeves-sqlite-test", url, executor_id="solo"))
    DBOS.launch()
    await durable.register_queue(polling_interval_sec=0.1)
    wid = await durable.enqueue("refund INV-7", session_id="q1", workflow_id="wf-1")
    with pytest.raises(Exception) as failed:
        await durable.result(wid)
    return failed.value


def database_text(url: str) -> str:
    from dbos import DBOS

    DBOS.destroy(destroy_registry=True)  # every write flushed to the file
    folder = Path(url.removeprefix("sqlite:///")).parent
    return "".join(p.read_bytes().decode("latin-1") for p in sorted(folder.iterdir()))


@pytest.mark.parametrize("recovery", [None, Recovery(reraise=True, sleep=RecordedSleeps())], ids=["none", "reraise"])
@pytest.mark.anyio
async def test_a_failed_workflows_error_is_kept_by_its_type_unless_details_are_exposed(
    dbos_app: str, recovery: Recovery | None
) -> None:
    """A run that raises (no Recovery, or reraise): DBOS keeps the error's type, not the secret its message quotes."""
    error = await failed_run(dbos_app, f"jeeves_test.shown_{recovery is None}", recovery)
    assert getattr(error, "name", None) == "ValueError"  # DBOS's PortableWorkflowError, named after the run's error
    assert SECRET not in str(error) and "Recovery(expose_details=True) keeps it" in str(error)
    assert SECRET not in database_text(dbos_app)


@pytest.mark.anyio
async def test_an_exposing_ladder_keeps_the_failed_workflows_message(dbos_app: str) -> None:
    recovery = Recovery(reraise=True, expose_details=True, sleep=RecordedSleeps())
    error = await failed_run(dbos_app, "jeeves_test.shown_exposed", recovery)
    assert getattr(error, "name", None) == "ValueError" and SECRET in str(error)
