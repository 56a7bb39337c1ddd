"""Seams: a consumer that leaves ``agent.stream()`` of a Router mid-way.

Over a provider's adapter (the OpenAI or Anthropic SDK on the loopback server), whose HTTP
stream awaits as it closes: leaving mid-answer (``break`` then ``aclose()``, or ``async
with``) closes the run cleanly. It used to raise ``RuntimeError: coroutine ignored
GeneratorExit`` from ``aclose()``: the run was closed by throwing ``GeneratorExit`` into it,
which Python turns into ``coroutine.close()`` down the chain of awaits, where no clean-up may
await.

With a specialist retried (its first model call times out; the Router's recovery, or its own
tool loop's, runs it again) the consumer leaves at each point of the run — before the
failure, at the retry, while the retried call streams, after it: no warning, no task left,
the refund made once, and :attr:`RunStream.spent` counts every request the run sent once. A
request whose answer was streaming when the consumer left was sent (its text was read): it
counts, its cost unknown, as a request a cancellation cuts off counts. It used to be counted
nowhere, so leaving mid-answer reported one request fewer than leaving just after it.
"""

from __future__ import annotations

import asyncio
import gc
from dataclasses import asdict
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from jeeves_router import Agent, Router, RouterRoute, tool
from jeeves_router.agent import RunStream
from jeeves_router.architectures.react import ToolLoop
from jeeves_router.journal import JournalRuntime, SQLiteJournal
from jeeves_router.journal.records import RunEndRecord
from jeeves_router.models.anthropic import AnthropicModel
from jeeves_router.models.openai import OpenAIModel
from jeeves_router.policies import RetryPolicy
from jeeves_router.recovery import Recovery
from jeeves_router.testing import Call, Chunks, FunctionModel, RecordedSleeps, Reply, ScriptedModel, StaticClassifier
from jeeves_router.usage import Usage
from tests.loopback import LoopbackServer, Status, loopback  # noqa: F401  (fixture)
from tests.loopback import Reply as WireReply
from tests.task_helpers import finish_generator_closes, pending_tasks, settled_tasks, warnings_of_this_test

GUARD_S = 30.0
USAGE = Usage(input_tokens=10, output_tokens=5, requests=1, cost_usd=0.0)


def desk(retried_by: str, refunds: list[str], journal: SQLiteJournal | None = None) -> tuple[Agent, FunctionModel]:
    """billing refunds, its next model call times out once, then it streams "Refund done."."""

    @tool
    def refund(invoice: str) -> str:
        """Refund an invoice."""
        refunds.append(invoice)
        return "refunded"

    timeouts = [TimeoutError("read timed out")]

    def answer(request: object) -> Reply:
        if request.messages[-1].role != "tool":  # type: ignore[attr-defined]
            return Reply(calls=[Call("refund", {"invoice": "INV-7"})], usage=USAGE)
        if timeouts:
            raise timeouts.pop()
        return Reply(text=Chunks("Refund ", "done."), usage=USAGE)

    model = FunctionModel(answer, name="billing")
    loop = ToolLoop(recovery=Recovery(sleep=RecordedSleeps())) if retried_by == "tool loop" else None
    billing = Agent("Billing.", name="billing", model=model, tools=[refund], architecture=loop)
    general = Agent("General.", name="general", model=ScriptedModel([]))
    router = Router(
        [RouterRoute("billing", billing), RouterRoute("general", general)],
        classifier=StaticClassifier("billing"),
        recovery=Recovery(sleep=RecordedSleeps()),
    )
    runtime = JournalRuntime(journal) if journal is not None else None
    return Agent("Desk", name="desk", runtime=runtime, architecture=router), model


async def leave_after(stream: RunStream, kind: str, nth: int, how: str) -> list[str]:
    """Read ``stream`` up to its ``nth`` event of ``kind``, then close it ``how``; the kinds read."""
    kinds: list[str] = []

    async def read() -> None:
        async for ev in stream:
            kinds.append(ev.kind)
            if ev.kind == kind and kinds.count(kind) == nth:
                break

    if how == "async with":
        async with stream:
            await read()
    else:
        await read()
        await stream.aclose()
    return kinds


STOPS = [
    ("tool.result", 1),  # before the failure
    ("recovery.retry", 1),  # at the retry, before its backoff
    ("text.delta", 1),  # the retried call streams
    ("text.delta", 2),  # its last chunk, before its response
    ("run.completed", 1),  # the specialist answered
]


@pytest.mark.anyio
@pytest.mark.parametrize("how", ["aclose", "async with"])
@pytest.mark.parametrize("retried_by", ["router", "tool loop"])
@pytest.mark.parametrize(("kind", "nth"), STOPS)
async def test_leaving_a_retried_routed_stream_is_clean_and_counts_each_request_once(
    retried_by: str, kind: str, nth: int, how: str
) -> None:
    refunds: list[str] = []
    agent, model = desk(retried_by, refunds)
    before = await settled_tasks()
    with warnings_of_this_test("error"):
        stream = agent.stream("refund INV-7", session_id="s")
        kinds = await leave_after(stream, kind, nth, how)
        gc.collect()
        await anyio.lowlevel.checkpoint()
    assert kinds.count(kind) == nth and stream.error is None
    assert pending_tasks() <= before
    assert refunds == ["INV-7"]
    assert stream.spent.requests == len(model.requests)  # each request sent, once
    answered = len(model.requests) - (len(model.requests) > 1) - (kind == "text.delta")  # not the timeout, not the cut
    assert stream.spent.input_tokens == answered * USAGE.input_tokens


@pytest.mark.anyio
@pytest.mark.parametrize("how", ["aclose", "async with"])
async def test_a_journaled_run_left_mid_answer_records_the_spend_the_stream_says(tmp_path: Path, how: str) -> None:
    journal = SQLiteJournal(tmp_path / "j.db")
    agent, model = desk("router", [], journal)
    stream = agent.stream("refund INV-7", session_id="s")
    await leave_after(stream, "text.delta", 1, how)
    [end] = [e.record for e in await journal.read("s", types=("run.end",))]
    assert isinstance(end, RunEndRecord) and end.status == "cut"
    assert stream.spent.requests == len(model.requests)
    assert end.usage == asdict(stream.spent)  # the journal's figure is the stream's


def wire_model(server: LoopbackServer, provider: str) -> OpenAIModel | AnthropicModel:
    """The provider's adapter on the loopback server; it retries a 503 once itself."""
    policy = RetryPolicy(max_attempts=2, initial_delay_s=0.5, jitter=0.0)
    if provider == "openai":
        return OpenAIModel("gpt-4.1-mini", client=server.openai_client(), retry=policy, sleep=RecordedSleeps())
    return AnthropicModel("claude-haiku-4-5", client=server.anthropic_client(), retry=policy, sleep=RecordedSleeps())


@pytest.mark.anyio
@pytest.mark.parametrize("how", ["aclose", "async with"])
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_leaving_a_routed_wire_stream_mid_answer_closes_it_cleanly_and_counts_both_requests(
    loopback: LoopbackServer,  # noqa: F811
    provider: str,
    how: str,
) -> None:
    loopback.script(Status(503), WireReply(text=["Refund ", "done."]))
    billing = Agent("Billing.", name="billing", model=wire_model(loopback, provider))
    router = Router([RouterRoute("billing", billing)], classifier=StaticClassifier("billing"), recovery=Recovery())
    agent = Agent("Desk", name="desk", architecture=router)
    before = await settled_tasks()
    with warnings_of_this_test("error"):
        stream = agent.stream("refund INV-7")
        kinds = await leave_after(stream, "text.delta", 1, how)
        await loopback.aclose_clients()
        gc.collect()  # the SDK's own iterator, left to the loop's finaliser: its aclose() is a task
        await finish_generator_closes(before)  # it may take more than one turn of the loop
    assert kinds[-1] == "text.delta" and stream.error is None
    assert pending_tasks() <= before
    assert len(loopback.requests) == 2  # the adapter's retry of the 503; the ladder saw no failure
    assert "recovery.retry" not in kinds
    # both count: the refused one (no cost) and the one left mid-answer (its cost unknown)
    assert (stream.spent.requests, stream.spent.cost_usd) == (2, None)


@pytest.mark.anyio
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_a_wire_stream_left_by_break_alone_is_closed_by_the_loop_without_an_error(
    loopback: LoopbackServer,  # noqa: F811
    provider: str,
) -> None:
    # No aclose(): the stream is dropped at the break, and the loop closes it in a task of its own, as it
    # closes an abandoned async generator. A cancellation the run had caught (happy eyeballs cancels the
    # losing connection attempt) kept the pump in its traceback: a cycle, freed only by the collector,
    # which closed the run's coroutines with GeneratorExit ("coroutine ignored GeneratorExit").
    loopback.script(WireReply(text=["Refund ", "done."]))
    billing = Agent("Billing.", name="billing", model=wire_model(loopback, provider))
    router = Router([RouterRoute("billing", billing)], classifier=StaticClassifier("billing"), recovery=Recovery())
    agent = Agent("Desk", name="desk", architecture=router)
    before = await settled_tasks()
    with warnings_of_this_test("error"):
        async for ev in agent.stream("refund INV-7"):
            if ev.kind == "text.delta":
                break
        await anyio.lowlevel.checkpoint()  # the loop starts its aclose() of the dropped stream as a task
        closing = pending_tasks() - before
        assert closing  # it was dropped at the break (not left to the collector)
        with anyio.fail_after(GUARD_S):  # only so that a regression fails instead of hanging
            while closing:
                await asyncio.gather(*closing)
                closing = pending_tasks() - before
        await loopback.aclose_clients()
        gc.collect()
    assert pending_tasks() <= before and len(loopback.requests) == 1
