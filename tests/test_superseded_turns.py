"""An older turn run again after a newer one leaves the session's sticky agent to the newer turn.

A sticky Router keeps the agent that answered a session's last turn in its session store, and
the next turn goes straight to it. A journaled turn can run again after newer turns of its
session: a client retrying a request with its idempotency key (the answer is replayed from the
first run), ``resume()`` of an earlier run (replayed, or finished live after a cut). Before the
fix that run wrote its own agent into the store at its end, so the session's next turn went to
the agent of the old turn instead of the agent that answered last. The newest turn of a session
still sets it when it is resumed (a process that lost its store learns it again).
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from jeeves_router import Agent, Router, RouterRoute
from jeeves_router.classify.types import ClassifyRequest, ClassifyResult
from jeeves_router.journal import JournalRuntime, SQLiteJournal
from jeeves_router.models.base import ModelRequest
from jeeves_router.testing import FunctionModel, StaticClassifier
from tests.test_seams_lifecycle import cancelled_once

pytestmark = pytest.mark.anyio


class ByWord:
    """Routes a request that mentions an error to ``technical``, any other to ``billing``."""

    async def classify(self, request: ClassifyRequest) -> ClassifyResult:
        route = "technical" if "error" in request.text else "billing"
        return await StaticClassifier(route, 0.9).classify(request)


class Stalls:
    """The billing model: its first answer waits until the run is cut (``reached`` set as it starts)."""

    def __init__(self) -> None:
        self.reached = anyio.Event()
        self.calls = 0

    async def __call__(self, request: ModelRequest) -> str:
        self.calls += 1
        if self.calls == 1:
            self.reached.set()
            await anyio.sleep(30)
        return "billing answer"


def desk(tmp_path: Path, billing_model: FunctionModel | None = None) -> Agent:
    billing = Agent("B.", name="billing", model=billing_model or FunctionModel(lambda r: "billing answer"))
    technical = Agent("T.", name="technical", model=FunctionModel(lambda r: "technical answer"))
    router = Router(
        [RouterRoute("billing", billing), RouterRoute("technical", technical)], classifier=ByWord(), sticky=True
    )
    return Agent("Desk.", name="desk", runtime=JournalRuntime(SQLiteJournal(tmp_path / "j.db")), architecture=router)


async def first_run_id(agent: Agent) -> str:
    entries = await agent.runtime.journal.read("s", types=("run.start",))  # type: ignore[attr-defined]
    return entries[0].run_id  # type: ignore[no-any-return]


@pytest.mark.parametrize("how", ["retried key", "resume"])
async def test_an_older_turn_replayed_after_a_newer_one_keeps_the_newer_sticky_agent(tmp_path: Path, how: str) -> None:
    agent = desk(tmp_path)
    first = await agent.run("refund me", session_id="s", idempotency_key="k1")
    newer = await agent.run("API error", session_id="s", options={"reset_sticky": True})
    assert (first.route, newer.route) == ("billing", "technical")
    if how == "retried key":  # the client's retry of the first request, arriving late
        again = await agent.run("refund me", session_id="s", idempotency_key="k1")
    else:
        again = await agent.resume("s", run_id=await first_run_id(agent))
    assert (again.output, again.route) == ("billing answer", "billing")  # the first turn's answer
    follow_up = await agent.run("and now?", session_id="s")
    assert (follow_up.route, follow_up.metadata["sticky"]) == ("technical", True)  # it went to billing


async def test_an_older_turn_finished_by_resume_after_a_newer_one_keeps_the_newer_sticky_agent(tmp_path: Path) -> None:
    stalls = Stalls()
    agent = desk(tmp_path, FunctionModel(stalls, name="billing"))

    async def first() -> None:
        await agent.run("refund me", session_id="s")

    assert (await cancelled_once(stalls.reached, first)).cancelled_caught  # cut while billing answers
    newer = await agent.run("API error", session_id="s")
    assert newer.route == "technical"
    finished = await agent.resume("s", run_id=await first_run_id(agent))  # live: the cut turn ends now
    assert (finished.status, finished.output, stalls.calls) == ("ok", "billing answer", 2)
    follow_up = await agent.run("and now?", session_id="s")
    assert (follow_up.route, follow_up.metadata["sticky"]) == ("technical", True)


async def test_the_newest_turn_resumed_after_a_cut_still_sets_the_sticky_agent(tmp_path: Path) -> None:
    stalls = Stalls()
    agent = desk(tmp_path, FunctionModel(stalls, name="billing"))
    await agent.run("API error", session_id="s")

    async def newest() -> None:
        await agent.run("refund me", session_id="s", options={"reset_sticky": True})

    assert (await cancelled_once(stalls.reached, newest)).cancelled_caught
    finished = await agent.resume("s")  # the last unfinished run: the newest turn
    assert (finished.status, finished.route) == ("ok", "billing")
    follow_up = await agent.run("and now?", session_id="s")
    assert (follow_up.route, follow_up.metadata["sticky"]) == ("billing", True)
