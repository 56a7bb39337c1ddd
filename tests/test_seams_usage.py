"""Where the new usage mechanisms meet the old ones: an agent as a tool, a failed run's spend, the server.

Each test drives a combination a user meets: an agent used as a tool under the caller's
time limit, inside a router that fails, in a stream closed early; a failed run streamed
over the OpenAI wire with ``stream_options.include_usage``.
"""

from __future__ import annotations

import gc
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
import openai
import pytest

from jeeves_router import Agent, Router, RouterRoute, tool
from jeeves_router.architectures.react import ToolLoop
from jeeves_router.classify.types import Classification, ClassifyRequest, ClassifyResult
from jeeves_router.errors import ModelError, ToolOutcomeUnknown
from jeeves_router.events import RunFailed
from jeeves_router.journal import JournalRuntime, SQLiteJournal
from jeeves_router.messages import TextPart
from jeeves_router.models.base import ModelRequest, ModelResponse, ModelStreamItem, ModelTextDelta
from jeeves_router.recovery import Recovery
from jeeves_router.results import RunResult
from jeeves_router.serve import create_app
from jeeves_router.testing import (
    CUT_USAGE,
    DEFAULT_USAGE,
    FAILED_USAGE,
    Call,
    Chunks,
    FunctionModel,
    RecordedSleeps,
    Reply,
    ScriptedModel,
)
from jeeves_router.usage import Usage, spent_usage, with_spent_usage
from tests.recovery_clock import Clock
from tests.serve_apps import desk_with, running
from tests.task_helpers import warnings_of_this_test

INNER = Usage(input_tokens=100, output_tokens=40, requests=1, cost_usd=0.25)  # the billing agent's one reply
LIMIT = 0.3  # real seconds the hung inner call waits before the caller's limit cuts it
GUARD = 10.0  # only so that a regression fails instead of hanging the suite

SPECIALIST = Usage(input_tokens=50, output_tokens=3, requests=1)  # what the provider reported before the drop


def _drops_mid_answer(request: object) -> Reply:
    return Reply(Chunks("Refund ", "iss"), usage=SPECIALIST, error=ConnectionResetError("connection reset"))


def test_a_streamed_chat_run_that_fails_mid_answer_still_sends_the_usage_it_asked_for() -> None:
    with running(create_app(desk_with(FunctionModel(_drops_mid_answer)))) as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)
        chunks = []
        with pytest.raises(openai.APIError) as info:
            for piece in client.chat.completions.create(
                model="desk",
                messages=[{"role": "user", "content": "refund"}],
                stream=True,
                stream_options={"include_usage": True},
            ):
                chunks.append(piece)
    assert "run failed (ConnectionResetError)" in str(info.value)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Refund iss"
    usage = [c.usage for c in chunks if c.usage is not None]
    assert len(usage) == 1 and chunks[-1].choices == []  # the usage chunk, last before the error, as a completed run's
    # the classifier's request (DEFAULT_USAGE) and the specialist's dropped one: the run's spent_usage
    spent = DEFAULT_USAGE + SPECIALIST
    assert (usage[0].prompt_tokens, usage[0].completion_tokens) == (spent.input_tokens, spent.output_tokens)


def test_the_run_failed_events_of_a_served_run_say_what_each_run_spent() -> None:
    with running(create_app(desk_with(FunctionModel(_drops_mid_answer)))) as server:
        body = httpx.post(server.url + "/v1/runs", json={"model": "desk", "input": "refund"}).text
    failed = {}
    for frame in body.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in frame.splitlines() if ": " in line)
        if fields.get("event") == "run.failed":
            data = json.loads(fields["data"])
            failed[tuple(data["path"])] = data["usage"]
    root, specialist = failed[("desk",)], failed[("desk", "billing")]
    assert (specialist["input_tokens"], specialist["output_tokens"]) == (
        SPECIALIST.input_tokens,
        SPECIALIST.output_tokens,
    )
    spent = DEFAULT_USAGE + SPECIALIST  # the classifier's request too
    assert (root["input_tokens"], root["output_tokens"], root["requests"]) == (
        spent.input_tokens,
        spent.output_tokens,
        spent.requests,
    )


# --- an agent as a tool under recovery -------------------------------------------------------------------


def hung_model(clock: Clock) -> FunctionModel:
    """A model whose call never answers; the caller's time passes from the call on (``clock.release``)."""

    async def hung(request: object) -> str:
        clock.release()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    return FunctionModel(hung, name="hung")


def _inner(model: Any, recovery: Recovery | None = None) -> Agent:
    arch = ToolLoop(recovery=recovery) if recovery is not None else None
    return Agent("You know the balances.", name="billing", model=model, architecture=arch)


def _caller(billing: Agent, model: Any, recovery: Recovery | None = None, **kw: Any) -> Agent:
    @tool
    async def ask_billing(question: str) -> RunResult:
        """Ask the billing specialist."""
        return await billing.run(question)

    arch = ToolLoop(recovery=recovery) if recovery is not None else None
    return Agent("You help.", name="desk", model=model, tools=[ask_billing], architecture=arch, **kw)


def _asks_billing(*then: Any) -> ScriptedModel:
    return ScriptedModel([Call("ask_billing", {"question": "balance of ACME?"}, id="c1"), *then])


@pytest.mark.anyio
async def test_an_inner_agents_own_retry_counts_its_failed_request_once_in_the_caller() -> None:
    inner = ScriptedModel([ModelError("overloaded", severity="retriable"), Reply("Balance: 0 EUR.", usage=INNER)])
    billing = _inner(inner, Recovery(sleep=RecordedSleeps()))
    result = await _caller(billing, _asks_billing("ACME owes nothing.")).run("Does ACME owe us?")
    assert (result.status, result.output) == ("ok", "ACME owes nothing.")
    assert len(inner.requests) == 2  # the failed request and its retry
    assert result.usage == DEFAULT_USAGE + FAILED_USAGE + INNER + DEFAULT_USAGE  # the failed one once


@pytest.mark.anyio
async def test_the_callers_time_limit_cutting_an_inner_agent_mid_call_counts_the_cut_request_once(
    clock: Clock,
) -> None:
    inner = hung_model(clock)
    outer = _asks_billing("never asked")
    desk = _caller(_inner(inner), outer, Recovery(time_limit_s=LIMIT, sleep=RecordedSleeps()))
    clock.hold()
    with anyio.fail_after(GUARD):
        result = await desk.run("Does ACME owe us?")
    report = result.report or {}
    assert result.status == "critical" and report["reason"] == "time_limit"
    assert report["operation"] == "tool:ask_billing"
    assert len(inner.requests) == 1 and len(outer.requests) == 1
    # the caller's turn, and the inner request the limit cut off (sent: it counts, its cost unknown)
    assert result.usage == DEFAULT_USAGE + CUT_USAGE
    assert result.usage.requests == 2


@pytest.mark.anyio
async def test_a_cut_inner_request_counts_once_in_the_failed_runs_spend_when_recovery_reraises(
    clock: Clock,
) -> None:
    desk = _caller(
        _inner(hung_model(clock)),
        _asks_billing("never asked"),
        Recovery(time_limit_s=LIMIT, reraise=True, sleep=RecordedSleeps()),
    )
    clock.hold()
    with anyio.fail_after(GUARD), pytest.raises(Exception) as info:
        await desk.run("Does ACME owe us?")
    assert spent_usage(info.value) == DEFAULT_USAGE + CUT_USAGE


@pytest.mark.anyio
async def test_an_inner_agent_cut_by_its_own_time_limit_inside_the_callers_counts_the_cut_request_once(
    clock: Clock,
) -> None:
    inner = hung_model(clock)
    billing = _inner(inner, Recovery(time_limit_s=LIMIT, sleep=RecordedSleeps()))
    outer = _asks_billing("Billing did not answer in time.")
    desk = _caller(billing, outer, Recovery(time_limit_s=GUARD * 10, sleep=RecordedSleeps()))
    clock.hold()
    with anyio.fail_after(GUARD):
        result = await desk.run("Does ACME owe us?")
    assert (result.status, result.output) == ("ok", "Billing did not answer in time.")
    assert len(inner.requests) == 1
    # the inner run's own box took its cut request (its RunResult counts it): the caller's box does not again
    assert result.usage == DEFAULT_USAGE + CUT_USAGE + DEFAULT_USAGE


@pytest.mark.anyio
async def test_a_journaled_run_whose_inner_agent_was_cut_resumes_to_the_same_usage_without_a_call(
    tmp_path: Path, clock: Clock
) -> None:
    inner = hung_model(clock)
    outer = _asks_billing("never asked")
    async with SQLiteJournal(tmp_path / "j.db") as journal:
        recovery = Recovery(time_limit_s=LIMIT, sleep=RecordedSleeps())
        desk = _caller(_inner(inner), outer, recovery, runtime=JournalRuntime(journal))
        clock.hold()
        with anyio.fail_after(GUARD):
            first = await desk.run("Does ACME owe us?", session_id="s")
        with anyio.fail_after(GUARD):
            again = await desk.resume("s")
    assert first.usage == DEFAULT_USAGE + CUT_USAGE
    assert (again.status, (again.report or {})["reason"], again.usage) == ("critical", "time_limit", first.usage)
    assert len(inner.requests) == 1 and len(outer.requests) == 1  # the replay called neither model


# --- a failed run's spend with an agent as a tool -----------------------------------------------------------


CLASSIFIER = Usage(input_tokens=30, output_tokens=5, requests=1)


class PaidClassifier:
    """Always ``accounts``, at the cost of one request."""

    async def classify(self, request: ClassifyRequest) -> ClassifyResult:
        return ClassifyResult(Classification("accounts", 1.0, "ok", "route: accounts"), usage=CLASSIFIER)


@pytest.mark.anyio
async def test_a_specialist_failing_after_asking_an_agent_counts_it_in_the_routers_spend_and_its_own() -> None:
    billing = _inner(ScriptedModel([Reply("Balance: 0 EUR.", usage=INNER)]))
    accounts = _caller(billing, _asks_billing(ModelError("overloaded")))
    other = Agent("Other.", name="other", model=ScriptedModel([]))
    desk = Agent(
        "Desk",
        name="front",
        architecture=Router(
            [RouterRoute("accounts", accounts), RouterRoute("other", other)], classifier=PaidClassifier()
        ),
    )
    failed: list[RunFailed] = []
    with pytest.raises(ModelError) as info:
        async with desk.stream("Does ACME owe us?") as events:
            async for ev in events:
                if isinstance(ev, RunFailed):
                    failed.append(ev)
    by_path = {ev.path: ev.usage for ev in failed}
    specialist = DEFAULT_USAGE + INNER + FAILED_USAGE  # its tool call turn, the agent it asked, its failed call
    assert by_path == {("front", "accounts"): specialist, ("front",): CLASSIFIER + specialist}
    assert spent_usage(info.value) == CLASSIFIER + specialist


# --- a stream closed while an agent used as a tool runs ----------------------------------------------------


class HungStream:
    """Streams ``Balance`` then waits forever; ``started`` once waiting, ``closed`` counts closed streams."""

    def __init__(self) -> None:
        self.started = anyio.Event()
        self.closed = 0

    @property
    def name(self) -> str:
        return "test:hung"

    async def request(self, request: ModelRequest) -> ModelResponse:
        raise AssertionError("the tool loop streams")

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        try:
            yield ModelTextDelta("Balance")
            self.started.set()
            await anyio.sleep_forever()
            yield ModelResponse((TextPart("never"),))
        finally:
            self.closed += 1


@pytest.mark.anyio
async def test_a_consumer_cancelled_while_an_agent_used_as_a_tool_runs_closes_the_inner_models_stream() -> None:
    """A consumer that stops waiting mid-tool (a served client that disconnected): the stream closes cleanly."""
    inner = HungStream()
    desk = _caller(_inner(inner), _asks_billing("never asked"))
    seen: list[str] = []

    async def cancel_when_mid_call(scope: anyio.CancelScope) -> None:
        await inner.started.wait()  # the inner agent is waiting on its model
        scope.cancel()

    with warnings_of_this_test() as caught:
        with anyio.fail_after(GUARD):
            async with desk.stream("Does ACME owe us?") as stream:
                with anyio.CancelScope() as scope:
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(cancel_when_mid_call, scope)
                        async for ev in stream:
                            seen.append(ev.kind)
            assert scope.cancelled_caught
        gc.collect()
    assert [str(w.message) for w in caught] == []
    assert seen[-1] == "tool.called" and "run.failed" not in seen
    assert inner.closed == 1  # the inner run's model stream was closed, not left to the garbage collector


@pytest.mark.anyio
async def test_a_keyed_retry_of_a_run_that_failed_after_asking_an_agent_reports_the_same_spend(
    tmp_path: Path,
) -> None:
    inner = ScriptedModel([Reply("Balance: 0 EUR.", usage=INNER)])
    async with SQLiteJournal(tmp_path / "j.db") as journal:
        first = _caller(_inner(inner), _asks_billing(ModelError("overloaded")), runtime=JournalRuntime(journal))
        with pytest.raises(ModelError) as failed:
            await first.run("Does ACME owe us?", idempotency_key="req-1")
        # the retry of the same request: the recorded turn and tool call are served, the failed call made again
        retry_model = ScriptedModel([ModelError("still overloaded")])
        retry = _caller(_inner(inner), retry_model, runtime=JournalRuntime(journal))
        events: list[RunFailed] = []
        with pytest.raises(ModelError) as again:
            async with retry.stream("Does ACME owe us?", idempotency_key="req-1") as stream:
                async for ev in stream:
                    if isinstance(ev, RunFailed):
                        events.append(ev)
    spent = DEFAULT_USAGE + INNER + FAILED_USAGE
    assert spent_usage(failed.value) == spent
    assert spent_usage(again.value) == spent and [ev.usage for ev in events] == [spent]
    assert len(inner.requests) == 1 and len(retry_model.requests) == 1  # the inner agent did not run again


@pytest.mark.anyio
async def test_a_tool_that_cannot_say_whether_it_ran_still_counts_what_its_agent_spent_in_the_failed_run() -> None:
    @tool
    async def ask_billing(question: str) -> str:
        """Ask the billing specialist (whose run lost track of a refund it may have issued)."""
        raise with_spent_usage(ToolOutcomeUnknown("the refund's outcome is unknown"), INNER)

    desk = Agent("You help.", name="desk", model=_asks_billing("never asked"), tools=[ask_billing])
    with pytest.raises(ToolOutcomeUnknown) as info:
        await desk.run("Refund ACME")
    assert spent_usage(info.value) == DEFAULT_USAGE + INNER  # the caller's turn and the agent the tool ran
