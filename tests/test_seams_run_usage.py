"""Seams of the run engine: usage counted once per model request across recovery, handoffs and classifiers.

* A routed specialist re-prompted after announcing a handoff, whose re-prompt then fails:
  its first reply is in the ledger and in the chain's tally; the failure counts it once.
* A recovery budget that stops a routed run after a handoff: ``usage`` is the run's own
  tally, the same as the sum of ``usage_by_route``.
* A tool-call classification (``classify_as_<route>``) or a cascade's second stage that
  fails after a paid reply: that reply counts, as it does for the LLM text classifier.
* ``usage_by_route`` after a handoff: each agent under the name ``RunResult.route`` (and the
  served headers, spans and session records) gives it, a handoff target under its own name.
"""

from __future__ import annotations

from typing import Any

import pytest

from jeeves_router import Agent, Router, RouterRoute
from jeeves_router.architectures.router import HandoffRouter
from jeeves_router.classify.cascade import CascadeClassifier
from jeeves_router.classify.llm import LLMClassifier
from jeeves_router.classify.types import Classification, ClassifyRequest, ClassifyResult
from jeeves_router.events import routing_update
from jeeves_router.recovery import Recovery
from jeeves_router.results import RunResult
from jeeves_router.testing import DEFAULT_USAGE, Call, RecordedSleeps, ScriptedModel, StaticClassifier, capture_events
from jeeves_router.usage import NO_USAGE, Usage

CLASSIFY_BILLING = Call("classify_as_billing", {"reason": "a refund", "confidence": 0.9})


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
    # one reply came back, counted once, and the dropped request counts as sent
    assert result.usage_by_route["billing"].requests == 2
    assert result.usage_by_route["billing"].input_tokens == 10
    assert result.usage.requests == 2


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


@pytest.mark.anyio
@pytest.mark.parametrize("recovers", [True, False])
async def test_a_tool_call_classification_that_fails_after_a_paid_correction_still_counts_its_reply(
    recovers: bool,
) -> None:
    # attempt 1: a reply without a classify call (paid), then its correction is dropped; attempt 2 routes
    script: list[Any] = ["I think billing.", TimeoutError("dropped")]
    script += [CLASSIFY_BILLING] if recovers else [TimeoutError("dropped")]  # the framework retry: 2 attempts
    router_model = ScriptedModel(script, name="router")
    billing = Agent("Billing.", name="billing", model=ScriptedModel(["Done."] if recovers else []))
    general = Agent("General.", name="general", model=ScriptedModel([]))
    desk = Agent(
        "Desk",
        name="desk",
        model=router_model,
        architecture=HandoffRouter(
            [RouterRoute("billing", billing), RouterRoute("general", general)],
            recovery=Recovery(sleep=RecordedSleeps()),
        ),
    )
    result = await desk.run("refund INV-7")
    router_model.assert_complete()
    paid = 2 if recovers else 1  # router replies that came back
    assert result.status == ("ok" if recovers else "critical")
    # every request counts, the dropped ones too; only the replies that came back have tokens
    assert result.usage_by_route["<classifier>"].requests == len(script)
    assert result.usage_by_route["<classifier>"].input_tokens == paid * 10
    assert result.usage.requests == len(script) + (1 if recovers else 0)


class PaidUnsure:
    """A first stage that pays for a model call and is never sure."""

    async def classify(self, request: ClassifyRequest) -> ClassifyResult:
        c = Classification(request.routes[0].name, 0.3, "ok", "paid")
        return ClassifyResult(c, usage=Usage(input_tokens=7, output_tokens=1, requests=1), stage="paid")


@pytest.mark.anyio
async def test_a_cascade_whose_second_stage_fails_still_counts_its_first_stage() -> None:
    second = LLMClassifier(ScriptedModel([TimeoutError("dropped"), "route: billing\nconfidence: 0.9"], name="llm"))
    billing = Agent("Billing.", name="billing", model=ScriptedModel(["Done."]))
    desk = Agent(
        "Desk",
        name="desk",
        architecture=Router(
            [RouterRoute("billing", billing), RouterRoute("general", Agent("General.", name="general"))],
            classifier=CascadeClassifier(PaidUnsure(), second),
            recovery=Recovery(sleep=RecordedSleeps()),
        ),
    )
    result = await desk.run("refund INV-7")
    assert result.status == "ok" and result.route == "billing"
    # the first stage ran on both attempts (2 paid), the second stage's request was dropped, then answered
    assert result.usage_by_route["<classifier>"].requests == 4
    assert result.usage.requests == 5


@pytest.mark.anyio
async def test_usage_by_route_keys_each_agent_by_the_name_route_gives_it() -> None:
    # the route "billing" (its agent is named "billing-agent") hands off to "refunds", not a declared route
    refunds = Agent("Refunds.", name="refunds", model=ScriptedModel(["Refunded.", "Still refunded."]))
    billing_model = ScriptedModel([Call("transfer_to_refunds", {"reason": "a refund"})])
    billing = Agent("Billing.", name="billing-agent", model=billing_model, handoffs=[refunds])
    general = Agent("General.", name="general", model=ScriptedModel([]))
    desk = Agent(
        "Desk",
        name="desk",
        architecture=Router(
            [RouterRoute("billing", billing), RouterRoute("general", general)],
            classifier=StaticClassifier("billing"),
            sticky=True,
        ),
    )
    for turn, keys in [("refund INV-7", {"<classifier>", "billing", "refunds"}), ("and?", {"refunds"})]:
        events = await capture_events(desk, turn, session_id="s")
        result = events[-1].result  # type: ignore[union-attr]
        routed: dict[str, Any] = {}  # the fold the served headers, the span and the session's turn record use
        for ev in events:
            if ev.path == ("desk",):
                routed.update(routing_update(ev) or {})
        # the agent that answered, under the name result.route gives it, is a key: a declared route's
        # name for the agent it dispatched to, an agent's own name past a handoff or on a sticky turn
        assert result.route == routed["route"] == "refunds"
        assert set(result.usage_by_route) == keys  # the sticky turn is not classified: no classifier key
        assert result.usage_by_route["refunds"] == DEFAULT_USAGE  # its own reply, not billing's
        assert total(result) == result.usage
