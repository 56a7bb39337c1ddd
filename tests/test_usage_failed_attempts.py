"""The usage of a failed attempt counts in the run's usage, whichever layer retries it.

Every model request sent counts once (see ``tests/test_usage_failed_requests.py``). A Router
with recovery counts a failed dispatch from the run's ledger: what was entered under the
route's path since the attempt started. A :class:`Capabilities` route's orchestrator and
selection calls (and the usage a function capability reports) were counted in its own usage
only, never entered in the ledger, so a Router that retried (or reclassified away from) a
failed Capabilities route dropped them.

``RouterCompleted.usage`` is what ``usage_by_route`` has for the answering agent: every
attempt and every visit of it in the turn (it was the last visit's result only).
"""

from __future__ import annotations

import pytest

from jeeves_router import Agent, Router, RouterRoute
from jeeves_router.architectures.capabilities.architecture import (
    Capabilities,
    Capability,
    CapabilityCall,
    CapabilityOutput,
)
from jeeves_router.errors import ModelError
from jeeves_router.events import Event, RouterCompleted
from jeeves_router.recovery import ErrorClassification, ErrorContext, ErrorSeverity, Recovery
from jeeves_router.testing import (
    DEFAULT_USAGE,
    FAILED_USAGE,
    Call,
    RecordedSleeps,
    ScriptedModel,
    StaticClassifier,
    capture_events,
)
from jeeves_router.usage import Usage
from tests.test_capabilities import Brain, plan

LOOKUP = Usage(input_tokens=7, output_tokens=3, requests=1, cost_usd=0.0)  # what a function capability reports


def judged(severity: ErrorSeverity):  # type: ignore[no-untyped-def]
    def hook(exc: BaseException, ctx: ErrorContext) -> ErrorClassification | None:
        return ErrorClassification(severity) if isinstance(exc, LookupError) else None

    return hook


def ops_desk(then: str) -> tuple[Agent, Brain, ScriptedModel, ScriptedModel]:
    """A recovering desk whose ``ops`` route is a Capabilities agent; its one capability fails once.

    The capability's failure asks for a reclassification, which Capabilities cannot do (no
    other capability to select): it escalates to the desk, whose ``ops`` route judges it
    ``then`` (retry the route, or reclassify to ``general``).
    """
    refunds_model = ScriptedModel([LookupError("no invoice"), "Refund issued."])
    refunds = Agent(
        "Refunds.", name="refunds", model=refunds_model, classify_error=judged(ErrorSeverity.RECLASSIFICATION)
    )
    brain = Brain(yes={"refunds"}, plans=[plan("refunds")])
    caps = [Capability("refunds", refunds, "refunds")]
    ops = Agent("Ops.", name="ops", model=brain.model, architecture=Capabilities(caps, recovery=Recovery()))
    general_model = ScriptedModel(["A person will look at it."])
    general = Agent("General.", name="general", model=general_model)
    severity = ErrorSeverity.RETRIABLE if then == "retry" else ErrorSeverity.RECLASSIFICATION
    desk = Agent(
        "Desk",
        name="desk",
        architecture=Router(
            [RouterRoute("ops", ops, classify_error=judged(severity)), RouterRoute("general", general)],
            classifier=StaticClassifier("ops"),
            fallback_route="general",
            recovery=Recovery(sleep=RecordedSleeps()),
        ),
    )
    return desk, brain, refunds_model, general_model


@pytest.mark.anyio
@pytest.mark.parametrize("then", ["retry", "reclassify"])
async def test_a_routers_retry_of_a_failed_capabilities_route_counts_its_orchestrator_and_selection(then: str) -> None:
    desk, brain, refunds_model, general_model = ops_desk(then)
    result = await desk.run("refund INV-7")
    if then == "retry":
        assert (result.status, result.route, result.output) == ("ok", "ops", "Refund issued.")
        assert brain.calls == {"select:refunds": 2, "plan": 2}  # once per attempt of the route
    else:
        assert (result.status, result.route, brain.calls["plan"]) == ("fallback", "general", 1)
    # the orchestrator's and selection's requests, the refund agent's (the failed one too), general's
    sent = len(brain.model.requests) + len(refunds_model.requests) + len(general_model.requests)
    assert result.usage.requests == sent
    assert sum(result.usage_by_route.values(), Usage()) == result.usage


def completed_usage(events: list[Event]) -> Usage:
    (done,) = [e for e in events if isinstance(e, RouterCompleted)]
    return done.usage


@pytest.mark.anyio
async def test_router_completed_counts_every_attempt_of_the_route_as_usage_by_route_does() -> None:
    billing_model = ScriptedModel([ModelError("overloaded", severity="retriable"), "Refund issued."])
    billing = Agent("Billing.", name="billing", model=billing_model)
    desk = Agent(
        "Desk",
        name="desk",
        architecture=Router(
            [RouterRoute("billing", billing)],
            classifier=StaticClassifier("billing"),
            recovery=Recovery(sleep=RecordedSleeps()),
        ),
    )
    events = await capture_events(desk, "refund INV-7")
    result = events[-1].result  # type: ignore[attr-defined]
    assert result.status == "ok" and len(billing_model.requests) == 2
    assert completed_usage(events) == result.usage_by_route["billing"] == DEFAULT_USAGE + FAILED_USAGE


@pytest.mark.anyio
async def test_router_completed_counts_every_visit_of_the_answering_agent_in_the_turn() -> None:
    # billing hands off to refunds, refunds hands the turn back, billing answers: two visits of billing
    refunds_model = ScriptedModel([Call("transfer_to_billing", {"reason": "not a refund"})])
    billing_model = ScriptedModel([Call("transfer_to_refunds", {"reason": "a refund"}), "Billing answers."])
    refunds = Agent("Refunds.", name="refunds", model=refunds_model)
    billing = Agent("Billing.", name="billing", model=billing_model, handoffs=[refunds])
    refunds.handoffs = [billing]
    desk = Agent(
        "Desk",
        name="desk",
        architecture=Router([RouterRoute("billing", billing)], classifier=StaticClassifier("billing")),
    )
    events = await capture_events(desk, "refund INV-7")
    result = events[-1].result  # type: ignore[attr-defined]
    assert (result.status, result.route, result.output) == ("ok", "billing", "Billing answers.")
    assert result.usage_by_route["billing"].requests == len(billing_model.requests) == 2
    assert completed_usage(events) == result.usage_by_route["billing"]


@pytest.mark.anyio
async def test_a_routers_retry_of_a_failed_capabilities_route_counts_what_a_function_capability_reported() -> None:
    lookups: list[CapabilityCall] = []

    async def lookup(call: CapabilityCall) -> CapabilityOutput:
        lookups.append(call)
        return CapabilityOutput("INV-7: paid twice", usage=LOOKUP)

    refunds_model = ScriptedModel([LookupError("no invoice"), "Refund issued."])
    refunds = Agent("Refunds.", name="refunds", model=refunds_model)
    brain = Brain(yes={"lookup", "refunds"}, plans=[plan("lookup", "refunds")])
    # a read (repeatable): the retry calls it again, and what each call reported counts
    caps = [Capability("lookup", lookup, "invoice lookups", repeatable=True), Capability("refunds", refunds, "refunds")]
    # reraise: the refund's critical failure leaves the Capabilities run, and the desk retries the route
    ops = Agent("Ops.", name="ops", model=brain.model, architecture=Capabilities(caps, recovery=Recovery(reraise=True)))
    desk = Agent(
        "Desk",
        name="desk",
        architecture=Router(
            [RouterRoute("ops", ops, classify_error=judged(ErrorSeverity.RETRIABLE))],
            classifier=StaticClassifier("ops"),
            recovery=Recovery(sleep=RecordedSleeps()),
        ),
    )
    result = await desk.run("refund INV-7")
    assert (result.status, result.output, len(lookups)) == ("ok", "Refund issued.", 2)  # once per attempt
    sent = len(brain.model.requests) + len(refunds_model.requests)
    assert result.usage.requests == sent + len(lookups) * LOOKUP.requests
    assert result.usage.input_tokens == len(lookups) * LOOKUP.input_tokens + (sent - 1) * DEFAULT_USAGE.input_tokens
    assert sum(result.usage_by_route.values(), Usage()) == result.usage
