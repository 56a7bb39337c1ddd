"""A model request that a run's time limit cuts off in flight counts: it was sent.

``Recovery(time_limit_s=...)`` cuts a wait by cancelling it (the time box), so the cut call
raises no exception of its own to carry its ``spent_usage``. The box collects what the calls
it cut off had spent (the request each was waiting on, with an unknown cost: the provider may
bill it) and marks its ``TimeoutError`` with it; the tool loop, a Router's classification and
Capabilities' orchestrator and selection count it, and a resumed run counts it again from the
journal. The limits here are a fraction of a second of real time; the run's time only starts
passing once the model is waiting (``clock``), and what is asserted is where the run stopped
and what it counted, never how long it took.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import anyio
import pytest

from jeeves_router import Agent, Router, RouterRoute
from jeeves_router.architectures.capabilities.architecture import Capabilities, Capability, CapabilityCall
from jeeves_router.architectures.react import ToolLoop
from jeeves_router.journal import JournalRuntime, SQLiteJournal
from jeeves_router.models.base import ModelRequest
from jeeves_router.models.openai import OpenAIModel
from jeeves_router.policies import RetryPolicy
from jeeves_router.recovery import Recovery
from jeeves_router.results import RunResult
from jeeves_router.testing import CUT_USAGE, FunctionModel, RecordedSleeps, ScriptedModel
from jeeves_router.usage import Usage
from tests.loopback import Hang, LoopbackServer, Status, loopback  # noqa: F401
from tests.recovery_clock import Clock

LIMIT = 0.3  # real seconds a hung call waits before the run's limit cuts it


def hanging(clock: Clock, answer: str = "unreachable") -> FunctionModel:
    """A model whose every request is sent and never answered; the run's time passes from then on."""

    async def fn(request: ModelRequest) -> str:
        clock.release()
        await anyio.sleep_forever()
        return answer

    return FunctionModel(fn, name="hung")


def stopped_by_the_limit(result: RunResult) -> None:
    assert result.status == "critical" and result.report is not None and result.report["reason"] == "time_limit"


async def never_run(call: CapabilityCall) -> str:
    raise AssertionError("the run stops before any capability runs")


def journaled(tmp_path: Path) -> JournalRuntime:
    return JournalRuntime(SQLiteJournal(tmp_path / "j.db"))


@pytest.mark.anyio
async def test_a_streamed_call_cut_off_by_the_time_limit_counts_and_resumes_to_the_same_usage(
    tmp_path: Path, clock: Clock
) -> None:
    model = hanging(clock)
    loop = ToolLoop(recovery=Recovery(time_limit_s=LIMIT, sleep=RecordedSleeps()))
    agent = Agent("Billing.", name="billing", model=model, architecture=loop, runtime=journaled(tmp_path))
    clock.hold()
    first = await agent.run("is INV-7 paid?", session_id="s")
    stopped_by_the_limit(first)
    assert len(model.requests) == 1
    assert first.usage == CUT_USAGE  # one request, sent and never answered: its cost is unknown
    replayed = await agent.resume("s")
    assert len(model.requests) == 1  # no call on resume
    assert (replayed.usage, replayed.usage_by_route) == (first.usage, first.usage_by_route)


@pytest.mark.anyio
async def test_a_classification_cut_off_by_the_time_limit_counts_and_resumes_to_the_same_usage(
    tmp_path: Path, clock: Clock
) -> None:
    model = hanging(clock)
    billing = Agent("Billing.", name="billing", model=ScriptedModel([]))
    router = Router([RouterRoute("billing", billing)], recovery=Recovery(time_limit_s=LIMIT, sleep=RecordedSleeps()))
    desk = Agent("Desk", name="desk", model=model, architecture=router, runtime=journaled(tmp_path))
    clock.hold()
    first = await desk.run("charged twice", session_id="s")
    stopped_by_the_limit(first)
    assert len(model.requests) == 1
    assert first.usage_by_route == {"<classifier>": CUT_USAGE} and first.usage == CUT_USAGE
    replayed = await desk.resume("s")
    assert len(model.requests) == 1
    assert (replayed.usage, replayed.usage_by_route) == (first.usage, first.usage_by_route)


@pytest.mark.anyio
async def test_concurrent_selection_calls_cut_off_by_the_time_limit_each_count(clock: Clock) -> None:
    model = hanging(clock)
    caps = [Capability("lookup", never_run, "invoice lookups"), Capability("refunds", never_run, "refunds")]
    arch = Capabilities(caps, recovery=Recovery(time_limit_s=LIMIT, sleep=RecordedSleeps()))
    desk = Agent("Ops", name="ops", model=model, architecture=arch)
    clock.hold()
    result = await desk.run("refund INV-7")
    stopped_by_the_limit(result)
    assert len(model.requests) == 2  # both yes/no calls were in flight
    assert result.usage_by_route == {"<classifier>": CUT_USAGE + CUT_USAGE} and result.usage == CUT_USAGE + CUT_USAGE


@pytest.mark.anyio
async def test_a_plan_cut_off_by_the_time_limit_counts(clock: Clock) -> None:
    def fn(request: ModelRequest) -> Any:
        if (request.system or "").startswith("You decide whether"):
            return "yes"
        return answer_later(request)

    async def answer_later(request: ModelRequest) -> str:
        clock.release()
        await anyio.sleep_forever()
        return "unreachable"

    model = FunctionModel(fn, name="brain")
    caps = [Capability("lookup", never_run, "invoice lookups")]
    arch = Capabilities(caps, recovery=Recovery(time_limit_s=LIMIT, sleep=RecordedSleeps()))
    desk = Agent("Ops", name="ops", model=model, architecture=arch)
    clock.hold()
    result = await desk.run("look INV-7 up")
    stopped_by_the_limit(result)
    assert len(model.requests) == 2  # the selection's, answered, and the plan's, cut off
    assert result.usage_by_route["<orchestrator>"] == CUT_USAGE
    assert result.usage.requests == 2


@pytest.mark.anyio
@pytest.mark.parametrize("cut", ["waiting", "backing_off"])
async def test_an_adapter_call_cut_off_by_the_time_limit_counts_every_request_it_sent(
    loopback: LoopbackServer,  # noqa: F811
    clock: Clock,
    cut: str,
) -> None:
    def refused(req: Any) -> Status:
        if cut == "backing_off":
            clock.release()  # the run's limit passes while the adapter waits to retry
        return Status(503)

    def hang(req: Any) -> Hang:
        clock.release()
        return Hang()

    loopback.script(refused, hang)
    # a real backoff (a second) when the limit cuts it; a recorded one when the next request must be sent
    sleep = None if cut == "backing_off" else RecordedSleeps()
    policy = RetryPolicy(max_attempts=3, initial_delay_s=1.0 if cut == "backing_off" else 0.5, jitter=0.0)
    model = OpenAIModel(
        "gpt-4.1-mini", client=loopback.openai_client(), retry=policy, sleep=sleep, rng=random.Random(0)
    )
    loop = ToolLoop(recovery=Recovery(time_limit_s=LIMIT, sleep=RecordedSleeps()))
    clock.hold()
    result = await Agent("Billing.", name="billing", model=model, architecture=loop).run("charged twice")
    stopped_by_the_limit(result)
    sent = len(loopback.requests)
    assert sent == (1 if cut == "backing_off" else 2)
    refusal = Usage(requests=1)  # an error answer: not billed
    assert result.usage == (refusal if cut == "backing_off" else refusal + CUT_USAGE)
