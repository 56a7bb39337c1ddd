"""Seams: a specialist's recovery escalates only to an enclosing architecture that acts on it.

A tool loop cannot reclassify or replan: under a Router or Capabilities with recovery it
re-raises such a failure for them to act on. Its ladder used to decide that from the run's
path alone (any nested run escalates), so a handoff target in a :class:`HandoffChain`, or a
specialist of a Router without recovery, raised the original exception where the same
failure at the top level stops with a report. Now a run escalates only when an enclosing
architecture acts on failures (a recovering Router or Capabilities), directly or through
chains and routers that pass failures on unchanged (``RunContext.escalate``).
"""

from __future__ import annotations

import pytest

from jeeves_router import Agent, Router, RouterRoute
from jeeves_router.recovery import ErrorClassification, ErrorContext, ErrorSeverity, Recovery
from jeeves_router.testing import Call, ScriptedModel, StaticClassifier


def reclassify(exc: BaseException, ctx: ErrorContext) -> ErrorClassification | None:
    return ErrorClassification(ErrorSeverity.RECLASSIFICATION) if isinstance(exc, LookupError) else None


def refunds() -> Agent:
    return Agent(
        "Refunds.", name="refunds", model=ScriptedModel([LookupError("no invoice")]), classify_error=reclassify
    )


@pytest.mark.anyio
async def test_a_handoff_target_whose_recovery_cannot_reclassify_stops_with_a_report() -> None:
    triage = Agent(
        "Triage.",
        name="triage",
        model=ScriptedModel([Call("transfer_to_refunds", {"reason": "r"})]),
        handoffs=[refunds()],
    )
    result = await triage.run("refund INV-7")
    assert result.status == "critical" and result.report is not None
    assert result.report["reason"] == "reclassify_unavailable"  # as the same failure of the first agent ends


@pytest.mark.anyio
async def test_a_specialist_of_a_router_without_recovery_stops_with_its_own_report() -> None:
    desk = Agent(
        "Desk",
        name="desk",
        architecture=Router([RouterRoute("refunds", refunds())], classifier=StaticClassifier("refunds")),
    )
    result = await desk.run("refund INV-7")
    assert result.status == "critical" and result.route == "refunds"
    assert result.report is not None and result.report["reason"] == "reclassify_unavailable"


def front_desk(recovery: Recovery) -> Agent:
    """A recovering front desk whose billing route is a Router without recovery in front of refunds."""
    billing = Agent(
        "Billing desk",
        name="billing_desk",
        architecture=Router([RouterRoute("refunds", refunds())], classifier=StaticClassifier("refunds")),
    )
    general = Agent("General.", name="general", model=ScriptedModel(["A person will look at your refund."]))
    return Agent(
        "Front desk",
        name="front",
        architecture=Router(
            [RouterRoute("billing", billing), RouterRoute("general", general)],
            classifier=StaticClassifier("billing"),
            fallback_route="general",
            recovery=recovery,
        ),
    )


@pytest.mark.anyio
async def test_a_judgement_escalated_through_a_plain_router_reaches_the_recovering_router() -> None:
    """Refunds judges its failure RECLASSIFICATION; the billing desk (no recovery) passes it on; the front
    desk, which recovers, reclassifies. It used to judge the failure again with its own hooks (none
    answer for a LookupError), so the type's default, CRITICAL, stopped the run instead."""
    result = await front_desk(Recovery()).run("refund INV-7")
    # reclassified without billing: the classifier still names it, so the fallback answers
    assert (result.status, result.route) == ("fallback", "general"), result.report
    assert result.output == "A person will look at your refund."


@pytest.mark.anyio
async def test_a_hook_of_the_recovering_router_still_overrides_an_escalated_judgement() -> None:
    def stop_on_lookups(exc: BaseException, ctx: ErrorContext) -> ErrorClassification | None:
        return ErrorClassification(ErrorSeverity.CRITICAL) if isinstance(exc, LookupError) else None

    result = await front_desk(Recovery(classify_error=stop_on_lookups)).run("refund INV-7")
    assert (result.status, result.route) == ("critical", "billing")
