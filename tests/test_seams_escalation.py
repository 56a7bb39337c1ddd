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
from jeeves_router.recovery import ErrorClassification, ErrorContext, ErrorSeverity
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
