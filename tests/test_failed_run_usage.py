"""A failed run reports what it spent: ``RunFailed.usage`` and the raised exception's ``spent_usage``.

Inside a run a failure carries what its own step spent (one failed model call), which the
layer that catches it enters in the run's ledger. What leaves ``run()`` / ``stream()`` is the
whole run's spend, every earlier turn and every run below it included, the figure the
``run.failed`` event of the root run gives; each child run's ``run.failed`` gives its own.
"""

from __future__ import annotations

from typing import Any

import pytest

from jeeves_router import Agent, Router, RouterRoute, tool
from jeeves_router.architectures.react import ToolLoop
from jeeves_router.classify.types import Classification, ClassifyRequest, ClassifyResult
from jeeves_router.errors import ModelError
from jeeves_router.events import RunFailed
from jeeves_router.journal import JournalRuntime, SQLiteJournal
from jeeves_router.recovery import Recovery
from jeeves_router.results import RunResult
from jeeves_router.testing import DEFAULT_USAGE, FAILED_USAGE, Call, RecordedSleeps, ScriptedModel
from jeeves_router.usage import Usage, spent_usage

CLASSIFIER = Usage(input_tokens=30, output_tokens=5, requests=1)


class PaidClassifier:
    """Always ``billing``, at the cost of one request."""

    async def classify(self, request: ClassifyRequest) -> ClassifyResult:
        return ClassifyResult(Classification("billing", 1.0, "ok", "route: billing"), usage=CLASSIFIER)


def failing_agent(name: str = "billing", *, steps: list[Any] | None = None, **kw: Any) -> Agent:
    """One good turn (a tool call), then a model call that fails for good."""

    @tool
    def lookup(customer: str) -> str:
        """Look a customer up."""
        return f"{customer}: 12 EUR due"

    script = steps if steps is not None else [Call("lookup", {"customer": "ACME"}), ModelError("overloaded")]
    return Agent("You know the balances.", name=name, model=ScriptedModel(script), tools=[lookup], **kw)


async def failed_events(agent: Agent, prompt: str = "What does ACME owe?") -> tuple[BaseException, list[RunFailed]]:
    failed: list[RunFailed] = []
    with pytest.raises(Exception) as info:
        async with agent.stream(prompt) as events:
            async for ev in events:
                if isinstance(ev, RunFailed):
                    failed.append(ev)
    return info.value, failed


@pytest.mark.anyio
async def test_a_failed_run_raises_with_the_whole_runs_spend_not_only_the_failed_call() -> None:
    agent = failing_agent()
    with pytest.raises(ModelError) as info:
        await agent.run("What does ACME owe?")
    assert spent_usage(info.value) == DEFAULT_USAGE + FAILED_USAGE  # the good turn, then the failed request
    assert spent_usage(info.value).requests == 2  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_the_run_failed_event_says_what_the_run_spent_as_the_exception_does() -> None:
    exc, failed = await failed_events(failing_agent())
    assert [ev.path for ev in failed] == [("billing",)]
    assert failed[0].usage == DEFAULT_USAGE + FAILED_USAGE == spent_usage(exc)


@pytest.mark.anyio
async def test_a_router_failure_carries_the_classifier_and_the_specialist_each_child_event_its_own() -> None:
    desk = Agent(
        "Desk",
        name="desk",
        architecture=Router(
            [
                RouterRoute("billing", failing_agent()),
                RouterRoute("other", Agent("O", name="other", model=ScriptedModel([]))),
            ],
            classifier=PaidClassifier(),
        ),
    )
    exc, failed = await failed_events(desk)
    by_path = {ev.path: ev.usage for ev in failed}
    assert by_path[("desk", "billing")] == DEFAULT_USAGE + FAILED_USAGE  # the specialist's own run
    assert by_path[("desk",)] == CLASSIFIER + DEFAULT_USAGE + FAILED_USAGE  # the whole routed run
    assert spent_usage(exc) == by_path[("desk",)]


@pytest.mark.anyio
async def test_retried_attempts_count_in_the_spend_of_a_run_that_then_fails() -> None:
    failures: list[Any] = [ModelError("overloaded", severity="retriable") for _ in range(3)]
    loop = ToolLoop(recovery=Recovery(reraise=True, sleep=RecordedSleeps()))
    agent = failing_agent(steps=[Call("lookup", {"customer": "ACME"}), *failures], architecture=loop)
    with pytest.raises(ModelError) as info:
        await agent.run("What does ACME owe?")
    assert spent_usage(info.value) == DEFAULT_USAGE + FAILED_USAGE + FAILED_USAGE + FAILED_USAGE  # three attempts


@pytest.mark.anyio
async def test_an_agent_used_as_a_tool_that_fails_counts_its_whole_spend_in_the_calling_run() -> None:
    billing = failing_agent()

    @tool
    async def ask_billing(question: str) -> RunResult:
        """Ask the billing specialist."""
        return await billing.run(question)

    outer = ScriptedModel([Call("ask_billing", {"question": "ACME?"}), "I could not find out."])
    result = await Agent("You help.", name="front", model=outer, tools=[ask_billing]).run("Does ACME owe us?")
    assert result.output == "I could not find out."
    # the caller's two turns, and the inner run's good turn and failed request (not only the failed request)
    assert result.usage == DEFAULT_USAGE + DEFAULT_USAGE + DEFAULT_USAGE + FAILED_USAGE


@pytest.mark.anyio
async def test_a_journaled_failed_run_reports_the_same_spend_when_resumed(tmp_path: Any) -> None:
    journal = SQLiteJournal(tmp_path / "j.db")
    try:
        agent = failing_agent(runtime=JournalRuntime(journal))
        with pytest.raises(ModelError) as first:
            await agent.run("What does ACME owe?", session_id="s1")
        assert spent_usage(first.value) == DEFAULT_USAGE + FAILED_USAGE
        # resumed, the recorded turn is served from the journal and the failed call is made again, and fails
        again = failing_agent(steps=[ModelError("still overloaded")], runtime=JournalRuntime(journal))
        with pytest.raises(ModelError) as resumed:
            await again.resume("s1")
        assert spent_usage(resumed.value) == DEFAULT_USAGE + FAILED_USAGE  # the replayed turn counts, as in usage
    finally:
        await journal.aclose()


@pytest.mark.anyio
async def test_a_failed_run_span_has_the_tokens_the_run_spent(monkeypatch: pytest.MonkeyPatch) -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)  # restored after the test
    try:
        with pytest.raises(ModelError):
            await failing_agent().run("What does ACME owe?")
    finally:
        provider.shutdown()
    (run_span,) = [s for s in exporter.get_finished_spans() if s.name == "invoke_agent billing"]
    spent = DEFAULT_USAGE + FAILED_USAGE
    assert run_span.attributes is not None
    assert run_span.attributes["gen_ai.usage.input_tokens"] == spent.input_tokens
    assert run_span.attributes["gen_ai.usage.output_tokens"] == spent.output_tokens
