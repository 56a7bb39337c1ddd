"""Seams of the run engine: usage counted once per model response across recovery, handoffs and classifiers.

* A routed specialist re-prompted after announcing a handoff, whose re-prompt then fails:
  its first reply is in the ledger and in the chain's tally; the failure counts it once.
* A recovery budget that stops a routed run after a handoff: ``usage`` is the run's own
  tally, the same as the sum of ``usage_by_route``.
"""

from __future__ import annotations

import pytest

from jeeves_router import Agent, Router, RouterRoute
from jeeves_router.recovery import Recovery
from jeeves_router.results import RunResult
from jeeves_router.testing import Call, RecordedSleeps, ScriptedModel, StaticClassifier
from jeeves_router.usage import NO_USAGE, Usage


def total(result: RunResult) -> Usage:
    out = NO_USAGE
    for used in result.usage_by_route.values():
        out = out + used
    return out


@pytest.mark.anyio
async def test_a_failed_reprompt_of_an_announced_handoff_counts_the_first_reply_once() -> None:
    # reply 1 announces a handoff without calling a tool (paid); the corrective re-prompt is dropped
    billing_model = ScriptedModel(["I'm transferring you to the general team now.", TimeoutError("dropped")])
    billing = Agent("Billing.", name="billing", model=billing_model)
    general = Agent("General.", name="general", model=ScriptedModel([]))
    desk = Agent(
        "Desk",
        name="desk",
        architecture=Router(
            [RouterRoute("billing", billing), RouterRoute("general", general)],
            classifier=StaticClassifier("billing"),
            hand_back=True,
            recovery=Recovery(sleep=RecordedSleeps()),
        ),
    )
    result = await desk.run("refund INV-7")
    assert result.status == "critical"  # the first reply's text reached the consumer: not retried
    billing_model.assert_complete()
    assert result.usage_by_route["billing"].requests == 1  # one reply came back, counted once
    assert result.usage.requests == 1


@pytest.mark.anyio
async def test_a_budget_stop_after_a_handoff_reports_the_usage_of_the_agent_that_handed_off() -> None:
    refunds = Agent("Refunds.", name="refunds", model=ScriptedModel([]))
    billing_model = ScriptedModel([Call("transfer_to_refunds", {"reason": "a refund"})])
    billing = Agent("Billing.", name="billing", model=billing_model, handoffs=[refunds])
    desk = Agent(
        "Desk",
        name="desk",
        architecture=Router(
            [RouterRoute("billing", billing)],
            classifier=StaticClassifier("billing"),
            recovery=Recovery(max_steps=2, sleep=RecordedSleeps()),  # classify, billing: no step for refunds
        ),
    )
    result = await desk.run("refund INV-7")
    assert result.status == "critical" and result.report is not None and result.report["reason"] == "max_steps"
    assert result.usage_by_route["billing"].requests == 1
    assert result.usage == total(result)
