"""A resumed run counts the requests of the attempts that failed before a step it replays.

A journaled run whose model call failed once (a 503 its Recovery ladder retried) and then
succeeded counted the failed request (sent: the provider may bill it) in its usage. When that
run was cut off or its process died before it ended, ``resume()`` replayed the answered call
from its record, but the resumed run's ``usage`` left the failed request out, although the
``step.failed`` record that keeps it was in the journal. Now a recorded result remembers the
attempt that made it, and the resume counts that attempt's failures at the step once (in
``usage`` and under the route in ``usage_by_route``): not again when a resume is resumed; a
replay of the completed run counts the same.
"""

from __future__ import annotations

import gc

import anyio
import pytest

from jeeves_router import Agent, Router, RouterRoute, tool
from jeeves_router.architectures.react import ToolLoop
from jeeves_router.classify import LLMClassifier
from jeeves_router.errors import ModelError
from jeeves_router.journal import JournalRuntime, MemoryJournal
from jeeves_router.models.base import ModelRequest
from jeeves_router.recovery import Recovery
from jeeves_router.testing import (
    DEFAULT_USAGE,
    FAILED_USAGE,
    Call,
    FunctionModel,
    RecordedSleeps,
    Reply,
    StaticClassifier,
)
from tests.test_seams_lifecycle import cancelled_once

pytestmark = pytest.mark.anyio

#: The resumed run's spend: the failed request, the lookup turn, the answer.
SPENT = FAILED_USAGE + DEFAULT_USAGE + DEFAULT_USAGE


class Billing:
    """The specialist's model: its first request fails once (503, retried), then it looks INV-7 up and answers."""

    def __init__(self, *, failures: int = 1) -> None:
        self.failures = failures
        self.requests = 0

    async def __call__(self, request: ModelRequest) -> Reply | str:
        self.requests += 1
        if request.messages[-1].role != "tool":
            if self.failures:
                self.failures -= 1
                raise ModelError("HTTP 503 overloaded", severity="retriable", status_code=503)  # one request spent
            return Reply(calls=[Call("lookup", {"invoice": "INV-7"})])
        return "INV-7 was paid twice."


class Lookup:
    """The lookup tool's body: it waits (the run is cut there) until told to answer."""

    def __init__(self) -> None:
        self.answers = False
        self.reached = anyio.Event()

    async def __call__(self, invoice: str) -> str:
        if not self.answers:
            self.reached.set()
            await anyio.sleep(30)
        return f"{invoice}: paid twice"


def desk(journal: MemoryJournal, model: Billing | FunctionModel, lookup: Lookup, classifier: object = None) -> Agent:
    @tool(repeatable=True)
    async def look_up(invoice: str) -> str:
        """Look an invoice up."""
        return await lookup(invoice)

    look_up.name = "lookup"
    specialist = Agent(
        "Billing.",
        name="billing",
        model=model if isinstance(model, FunctionModel) else FunctionModel(model, name="billing"),
        tools=[look_up],
        architecture=ToolLoop(recovery=Recovery(sleep=RecordedSleeps())),
    )
    router = Router(
        [RouterRoute("billing", specialist)],
        classifier=classifier or StaticClassifier("billing"),
        recovery=Recovery(sleep=RecordedSleeps()),  # retries a failed classification
    )
    return Agent("Desk.", name="desk", architecture=router, runtime=JournalRuntime(journal))


async def cut_at_lookup(agent: Agent, lookup: Lookup, body: str = "run") -> None:
    """Run (or resume) ``agent`` until its lookup is reached, then cut it off there."""
    lookup.reached = anyio.Event()
    call = (lambda: agent.run("was INV-7 paid?", session_id="s")) if body == "run" else (lambda: agent.resume("s"))
    scope = await cancelled_once(lookup.reached, call)
    gc.collect()
    assert scope.cancelled_caught


async def died(journal: MemoryJournal) -> MemoryJournal:
    """The journal as a process that died instead of being cut leaves it: no ``run.end``."""
    kept = MemoryJournal()
    for session in await journal.sessions():  # the specialist's steps are journaled under its own session
        await kept.append([e for e in await journal.read(session) if e.record.type != "run.end"])
    return kept


@pytest.mark.parametrize("ending", ["cut", "died"])
async def test_a_resumed_run_counts_the_failed_attempt_before_a_call_it_replays(ending: str) -> None:
    journal, billing, lookup = MemoryJournal(), Billing(), Lookup()
    await cut_at_lookup(desk(journal, billing, lookup), lookup)
    assert billing.requests == 2  # the 503, then the lookup turn
    if ending == "died":
        journal = await died(journal)

    lookup.answers = True
    resumed = await desk(journal, billing, lookup).resume("s")
    assert (resumed.status, resumed.output, billing.requests) == ("ok", "INV-7 was paid twice.", 3)
    assert resumed.usage == SPENT and resumed.usage_by_route["billing"] == SPENT  # the 503 counted once

    replayed = await desk(journal, billing, lookup).resume("s")  # the completed run, from the journal
    assert billing.requests == 3
    assert (replayed.usage, replayed.usage_by_route) == (resumed.usage, resumed.usage_by_route)


async def test_a_resume_resumed_again_counts_the_failed_attempt_once() -> None:
    journal, billing, lookup = MemoryJournal(), Billing(), Lookup()
    agent = desk(journal, billing, lookup)
    await cut_at_lookup(agent, lookup)
    await cut_at_lookup(desk(journal, billing, lookup), lookup, "resume")  # cut again at the same tool
    lookup.answers = True
    resumed = await desk(journal, billing, lookup).resume("s")
    assert (resumed.status, billing.requests) == ("ok", 3)
    assert resumed.usage == SPENT
    replayed = await desk(journal, billing, lookup).resume("s")
    assert replayed.usage == SPENT


async def test_a_keyed_retry_of_a_cut_run_counts_the_failed_attempt_and_its_replay_the_same() -> None:
    journal, billing, lookup = MemoryJournal(), Billing(), Lookup()
    lookup.reached = anyio.Event()
    key = "refund-INV-7"
    agent = desk(journal, billing, lookup)
    scope = await cancelled_once(lookup.reached, lambda: agent.run("was INV-7 paid?", idempotency_key=key))
    gc.collect()
    assert scope.cancelled_caught
    lookup.answers = True
    retried = await desk(journal, billing, lookup).run("was INV-7 paid?", idempotency_key=key)
    assert (retried.status, retried.usage, billing.requests) == ("ok", SPENT, 3)
    again = await desk(journal, billing, lookup).run("was INV-7 paid?", idempotency_key=key)  # completed: replayed
    assert (again.usage, again.usage_by_route, billing.requests) == (retried.usage, retried.usage_by_route, 3)


async def test_a_resumed_run_counts_a_classification_that_failed_before_the_one_it_replays() -> None:
    calls: list[ModelRequest] = []

    async def classify(request: ModelRequest) -> str:
        calls.append(request)
        if len(calls) == 1:
            raise ModelError("HTTP 503 overloaded", severity="retriable", status_code=503)
        return "route: billing\nconfidence: 0.9"

    journal, billing, lookup = MemoryJournal(), Billing(failures=0), Lookup()
    classifier = LLMClassifier(FunctionModel(classify))
    await cut_at_lookup(desk(journal, billing, lookup, classifier), lookup)
    assert len(calls) == 2  # failed, retried
    lookup.answers = True
    resumed = await desk(journal, billing, lookup, classifier).resume("s")
    assert (resumed.status, len(calls)) == ("ok", 2)
    assert resumed.usage_by_route["<classifier>"] == FAILED_USAGE + DEFAULT_USAGE
    replayed = await desk(journal, billing, lookup, classifier).resume("s")
    assert (replayed.usage, replayed.usage_by_route) == (resumed.usage, resumed.usage_by_route)
