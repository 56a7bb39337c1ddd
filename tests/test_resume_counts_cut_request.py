"""A run resumed after a cut counts the model request the cut left waiting, as the cut run did.

A journaled run cut (cancelled by its caller, its server's shutdown, its stream closed) while a
model request waits for its answer records what it spent on its ``run.end`` ``cut``: its
answered requests and the one left waiting (sent: the provider may bill it). ``resume()``
finishes the run, replaying the answered requests (their usage counts again, as a resume
counts every recorded turn) and sending the cut one again. But the resumed run's ``usage``
left the cut request out: the run as a whole had sent it, the cut run's own figure said so,
and a run cut by its time limit, resumed, does count it. Now the request a cut left waiting
is journaled with the step it belonged to, and the resumed run counts it there, in
``usage`` and under its route in ``usage_by_route``; a later replay of the completed run
counts it as well.
"""

from __future__ import annotations

import gc
from dataclasses import asdict

import anyio
import pytest

from jeeves_router import Agent, Router, RouterRoute, tool
from jeeves_router.journal import JournalRuntime, MemoryJournal
from jeeves_router.journal.records import RunEndRecord
from jeeves_router.models.base import ModelRequest
from jeeves_router.testing import CUT_USAGE, DEFAULT_USAGE, Call, FunctionModel, Reply, StaticClassifier
from tests.task_helpers import pending_tasks, settled_tasks, warnings_of_this_test
from tests.test_seams_lifecycle import cancelled_once

pytestmark = pytest.mark.anyio


class Billing:
    """The specialist's model: looks INV-7 up, then answers; its first answer waits until the run is cut."""

    def __init__(self) -> None:
        self.requests = 0
        self.reached = anyio.Event()

    async def __call__(self, request: ModelRequest) -> Reply | str:
        self.requests += 1
        if request.messages[-1].role != "tool":
            return Reply(calls=[Call("lookup", {"invoice": "INV-7"})])
        if not self.reached.is_set():
            self.reached.set()
            await anyio.sleep(30)  # cut here: sent, never answered
        return "INV-7 was paid twice."


def desk(billing: Billing, journal: MemoryJournal) -> Agent:
    @tool(repeatable=True)
    def lookup(invoice: str) -> str:
        """Look an invoice up."""
        return f"{invoice}: paid twice"

    specialist = Agent("Billing.", name="billing", model=FunctionModel(billing, name="billing"), tools=[lookup])
    router = Router([RouterRoute("billing", specialist)], classifier=StaticClassifier("billing"))
    return Agent("Desk.", name="desk", architecture=router, runtime=JournalRuntime(journal))


async def cut_mid_answer(journal: MemoryJournal, billing: Billing) -> None:
    agent = desk(billing, journal)
    before = await settled_tasks()
    with warnings_of_this_test("error"):
        scope = await cancelled_once(billing.reached, lambda: agent.run("was INV-7 paid?", session_id="s"))
        gc.collect()
    assert scope.cancelled_caught and pending_tasks() <= before
    assert billing.requests == 2


async def test_a_resumed_run_counts_the_request_its_cut_left_waiting() -> None:
    journal, billing = MemoryJournal(), Billing()
    await cut_mid_answer(journal, billing)
    [end] = [e.record for e in await journal.read("s", types=("run.end",))]
    assert isinstance(end, RunEndRecord) and end.usage == asdict(DEFAULT_USAGE + CUT_USAGE)  # the cut run's figure

    resumed = await desk(billing, journal).resume("s")
    assert (resumed.status, resumed.output, billing.requests) == ("ok", "INV-7 was paid twice.", 3)
    spent = DEFAULT_USAGE + CUT_USAGE + DEFAULT_USAGE  # the lookup turn, the cut request, the answer
    assert resumed.usage == spent and resumed.usage_by_route["billing"] == spent  # counted under its route

    replayed = await desk(billing, journal).resume("s")  # the completed run, from the journal
    assert billing.requests == 3
    assert (replayed.usage, replayed.usage_by_route) == (resumed.usage, resumed.usage_by_route)


async def test_a_run_resumed_twice_counts_each_cut_request_once() -> None:
    journal, billing = MemoryJournal(), Billing()
    await cut_mid_answer(journal, billing)
    billing.reached = anyio.Event()  # the resume's answer waits too: cut again
    with warnings_of_this_test("error"):
        await cancelled_once(billing.reached, lambda: desk(billing, journal).resume("s"))
        gc.collect()
    resumed = await desk(billing, journal).resume("s")
    assert (resumed.status, billing.requests) == ("ok", 4)
    assert resumed.usage == DEFAULT_USAGE + CUT_USAGE + CUT_USAGE + DEFAULT_USAGE


async def test_a_resumed_run_counts_a_classification_its_cut_left_waiting() -> None:
    from jeeves_router.classify import LLMClassifier

    reached, calls = anyio.Event(), []

    async def classify(request: ModelRequest) -> str:
        calls.append(request)
        if len(calls) == 1:
            reached.set()
            await anyio.sleep(30)  # cut here: sent, never answered
        return "route: billing\nconfidence: 0.9"

    def routed(journal: MemoryJournal) -> Agent:
        billing = Agent("Billing.", name="billing", model=FunctionModel(lambda r: "Paid twice.", name="billing"))
        router = Router([RouterRoute("billing", billing)], classifier=LLMClassifier(FunctionModel(classify)))
        return Agent("Desk.", name="desk", architecture=router, runtime=JournalRuntime(journal))

    journal = MemoryJournal()
    with warnings_of_this_test("error"):
        await cancelled_once(reached, lambda: routed(journal).run("was INV-7 paid?", session_id="s"))
        gc.collect()
    resumed = await routed(journal).resume("s")
    assert (resumed.status, resumed.output, len(calls)) == ("ok", "Paid twice.", 2)
    assert resumed.usage_by_route["<classifier>"] == CUT_USAGE + DEFAULT_USAGE  # the cut request and the answer
    assert resumed.usage == CUT_USAGE + DEFAULT_USAGE + DEFAULT_USAGE
    replayed = await routed(journal).resume("s")
    assert (replayed.usage, replayed.usage_by_route) == (resumed.usage, resumed.usage_by_route)
