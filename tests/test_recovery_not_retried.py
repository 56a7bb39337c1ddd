"""A RETRIABLE answer the ladder does not follow is said so in the report, with the reason.

Two failures are never retried by the ladder, whatever a ``classify_error`` hook answers: a
stream that broke after its text reached the consumer (a retry would send that text twice) and
a model call whose adapter already spent its own retries (one retry layer per job: the
adapter's). The run stops ``critical`` either way; the report's ``not_retried`` says why the
RETRIABLE judgement was not followed, and its suggestions never point back at a hook's
RETRIABLE or the step's ``RetryPolicy`` that cannot change the outcome.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from jeeves_router import Agent, StreamInterrupted
from jeeves_router.architectures import ToolLoop
from jeeves_router.errors import ModelError
from jeeves_router.events import RecoveryReport, TextDelta
from jeeves_router.models.openai import OpenAIModel
from jeeves_router.policies import RetryPolicy
from jeeves_router.recovery import ErrorClassification, ErrorContext, ErrorSeverity, Recovery
from jeeves_router.testing import Chunks, RecordedSleeps, Reply, ScriptedModel
from tests.loopback import LoopbackServer, Status, loopback  # noqa: F401

POLICY = RetryPolicy(max_attempts=3, initial_delay_s=0.5, multiplier=2.0, max_delay_s=5.0, jitter=0.0)
RETRY_HOOK_ADVICE = "return RETRIABLE from a classify_error hook"
STEP_POLICY_ADVICE = "raise the step's RetryPolicy.max_attempts"


def retriable(exc: BaseException, context: ErrorContext) -> ErrorClassification | None:
    """The hook a user writes after reading "if the failure is transient, return RETRIABLE"."""
    return ErrorClassification(ErrorSeverity.RETRIABLE) if isinstance(exc, (ModelError, OSError)) else None


def interrupted_then_fine() -> ScriptedModel:
    return ScriptedModel([Reply(Chunks("Refund ", "iss"), error=StreamInterrupted("cut")), "Refund issued."])


async def _streamed(agent: Agent) -> tuple[list[str], RecoveryReport, Any]:
    texts: list[str] = []
    reports: list[RecoveryReport] = []
    async with agent.stream("refund me") as events:
        async for event in events:
            if isinstance(event, TextDelta):
                texts.append(event.text)
            elif isinstance(event, RecoveryReport):
                reports.append(event)
    (report,) = reports
    return texts, report, events.result


@pytest.mark.anyio
async def test_a_hooks_retriable_for_an_interrupted_stream_is_not_followed_and_the_report_says_why() -> None:
    model = interrupted_then_fine()
    agent = Agent("Billing.", name="billing", model=model, classify_error=retriable)
    texts, event, result = await _streamed(agent)
    assert texts == ["Refund ", "iss"] and len(model.requests) == 1  # no retry, no text twice
    assert result.status == "critical" and result.report == event.report
    report = event.report
    assert report["severity"] == "retriable" and report["reason"] == "output_started"
    assert "RETRIABLE" in report["not_retried"] and "reached the consumer" in report["not_retried"]
    assert not any(RETRY_HOOK_ADVICE in s for s in report["suggestions"])


@pytest.mark.anyio
async def test_an_interrupted_stream_judged_by_default_is_not_sent_to_a_retriable_hook() -> None:
    """The default report of a StreamInterrupted does not advise the hook answer that would not be followed."""
    model = interrupted_then_fine()
    agent = Agent("Billing.", name="billing", model=model, architecture=ToolLoop(recovery=Recovery()))
    result = await agent.run("refund me")
    assert result.status == "critical" and result.report["reason"] == "critical"
    suggestions = " ".join(result.report["suggestions"])
    assert RETRY_HOOK_ADVICE not in suggestions
    assert "StreamInterrupted" in suggestions and "not retried" in suggestions
    assert "not_retried" not in result.report  # nothing judged it RETRIABLE


@pytest.mark.anyio
@pytest.mark.parametrize("hook", [None, retriable], ids=["default", "hook"])
async def test_a_call_the_adapter_gave_up_on_is_not_retried_and_the_report_names_the_adapter(
    loopback: LoopbackServer,  # noqa: F811
    hook: Any,
) -> None:
    loopback.responder = lambda req: Status(503)
    sleeps = RecordedSleeps()
    client = loopback.openai_client()
    model = OpenAIModel("gpt-4.1-mini", client=client, retry=POLICY, sleep=sleeps, rng=random.Random(0))
    agent = Agent(
        "Billing.",
        name="billing",
        model=model,
        architecture=ToolLoop(recovery=Recovery(sleep=sleeps, retry_policy=RetryPolicy(max_attempts=5))),
        classify_error=hook,
    )
    result = await agent.run("refund me")
    assert len(loopback.requests) == POLICY.max_attempts  # the adapter's 3, the ladder's none
    report = result.report
    assert result.status == "critical" and report["reason"] == "retries_exhausted"
    assert "adapter" in report["not_retried"] and "3 attempts" in report["not_retried"]
    suggestions = " ".join(report["suggestions"])
    assert STEP_POLICY_ADVICE not in suggestions and "retry=RetryPolicy(max_attempts=" in suggestions


@pytest.mark.anyio
async def test_a_step_the_ladder_retried_to_its_limit_has_no_not_retried() -> None:
    model = ScriptedModel([ConnectionError("down")] * 3)
    sleeps = RecordedSleeps()
    recovery = Recovery(sleep=sleeps, retry_policy=RetryPolicy(max_attempts=3, jitter=0.0))
    agent = Agent("Billing.", name="billing", model=model, architecture=ToolLoop(recovery=recovery))
    result = await agent.run("refund me")
    assert len(model.requests) == 3 and result.report["reason"] == "retries_exhausted"
    assert "not_retried" not in result.report
    assert any(STEP_POLICY_ADVICE in s for s in result.report["suggestions"])
