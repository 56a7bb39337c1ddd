"""Under DBOS too, an older turn run again after a newer one leaves the session's sticky agent to the newer turn.

With a journal, a turn run again after newer turns of its session (``resume()`` of an earlier
run, a retried idempotency key) is marked superseded (``RunContext.superseded``) and does not
write its agent into a sticky Router's session store. ``DBOSRuntime`` marked nothing: an
older turn's workflow run again after a newer turn's workflow had started — forked
(``DBOS.fork_workflow``) or recovered after its worker died — wrote its own agent into the
store at its end, and the session's next turn went to the old turn's agent instead of the
one that answered last. Now the DBOS runtime marks such a run superseded as the journal does:
an execution that is not its workflow's first (a fork, a recovery) of a turn older than
another turn's workflow of its session. The newest turn, forked, still sets the sticky agent.
"""

from __future__ import annotations

import pytest

from jeeves_router import Agent, Router, RouterRoute
from jeeves_router.architectures.handoffs.session import InMemorySessionStore
from jeeves_router.testing import FunctionModel
from tests.test_superseded_turns import ByWord


def desk(store: InMemorySessionStore) -> Agent:
    from jeeves_router.durable.dbos import DBOSRuntime

    billing = Agent("B.", name="billing", model=FunctionModel(lambda r: "billing answer", name="billing"))
    technical = Agent("T.", name="technical", model=FunctionModel(lambda r: "technical answer", name="technical"))
    routes = [RouterRoute("billing", billing), RouterRoute("technical", technical)]
    router = Router(routes, classifier=ByWord(), sticky=True, session_store=store)
    return Agent("Desk.", name="desk", runtime=DBOSRuntime(), architecture=router)


async def two_turns(dbos_app: str, store: InMemorySessionStore, name: str) -> object:
    """Launch DBOS; run turn ``wf-1`` (billing), then, its sticky entry gone, turn ``wf-2`` (technical)."""
    from dbos import DBOS

    from jeeves_router.durable.dbos import DurableAgents, dbos_config

    durable = DurableAgents([desk(store)], workflow_name=f"jeeves_test.superseded_{name}")
    DBOS(config=dbos_config("jeeves-sqlite-test", dbos_app, executor_id="solo"))
    DBOS.launch()
    await durable.register_queue(polling_interval_sec=0.1)
    first = await durable.result(await durable.enqueue("refund me", session_id="s", workflow_id="wf-1"))
    await store.delete("s")  # the sticky entry expired: the next turn is classified
    newer = await durable.result(await durable.enqueue("API error", session_id="s", workflow_id="wf-2"))
    assert (first.route, newer.route, await store.get("s")) == ("billing", "technical", "technical")
    return durable


async def fork_from_its_answer(workflow_id: str) -> str:
    """Fork ``workflow_id`` from its last model call: the run again from there (as a worker killed mid-answer)."""
    from dbos import DBOS

    steps = await DBOS.list_workflow_steps_async(workflow_id)
    answer = [s["function_id"] for s in steps if s["function_name"] == "model"][-1]
    return (await DBOS.fork_workflow_async(workflow_id, answer)).workflow_id  # type: ignore[no-any-return]


@pytest.mark.anyio
async def test_an_older_turn_forked_after_a_newer_one_keeps_the_newer_sticky_agent(dbos_app: str) -> None:
    store = InMemorySessionStore()
    durable = await two_turns(dbos_app, store, "older")
    again = await durable.result(await fork_from_its_answer("wf-1"))  # type: ignore[attr-defined]
    assert (again.output, again.route) == ("billing answer", "billing")  # the first turn's answer
    assert await store.get("s") == "technical"
    follow_up = await durable.result(await durable.enqueue("and now?", session_id="s"))  # type: ignore[attr-defined]
    assert (follow_up.route, follow_up.metadata["sticky"]) == ("technical", True)  # it went to billing


@pytest.mark.anyio
async def test_the_newest_turn_forked_still_sets_the_sticky_agent(dbos_app: str) -> None:
    store = InMemorySessionStore()
    durable = await two_turns(dbos_app, store, "newest")
    await store.delete("s")  # a worker that lost its store
    again = await durable.result(await fork_from_its_answer("wf-2"))  # type: ignore[attr-defined]
    assert again.route == "technical" and await store.get("s") == "technical"
