"""An explanation request that ``Recovery(explain_timeout_s=...)`` cuts off counts, as any cut request does.

The explanation of a report is a model call of the run and counts in its usage. One that did
not answer within ``explain_timeout_s`` was cut by a cancel scope: no exception of its own
carried what it spent, and the run's usage left it out (the README: every request that was
sent counts once; one cut off while it waited counts with an unknown cost). A cancellation
from outside the run reaches the enclosing ``cut_requests`` scope instead, whose owner counts it.
"""

from __future__ import annotations

import anyio
import pytest

from jeeves_router import Agent, Recovery, ToolLoop
from jeeves_router.models.base import ModelRequest
from jeeves_router.testing import CUT_USAGE, FAILED_USAGE, FunctionModel, RecordedSleeps, ScriptedModel
from jeeves_router.usage import cut_requests


def agent(explainer: FunctionModel) -> Agent:
    recovery = Recovery(explain_model=explainer, explain_timeout_s=0.01, sleep=RecordedSleeps())
    return Agent(
        "B.", name="billing", model=ScriptedModel([ValueError("bad invoice")]), architecture=ToolLoop(recovery=recovery)
    )


@pytest.mark.anyio
async def test_an_explanation_cut_by_its_timeout_counts_its_request() -> None:
    async def never_answers(request: ModelRequest) -> str:
        await anyio.Event().wait()
        raise AssertionError("unreachable")

    result = await agent(FunctionModel(never_answers, name="explainer")).run("refund INV-1")
    assert result.status == "critical" and "explanation" not in result.report
    assert result.usage == FAILED_USAGE + CUT_USAGE  # the failed call, and the explanation it cut (cost unknown)
    assert result.usage.cost_usd is None


@pytest.mark.anyio
async def test_an_explanation_cut_from_outside_is_counted_by_the_scope_that_cut_it() -> None:
    with anyio.CancelScope() as outer:

        async def cancels_the_caller(request: ModelRequest) -> str:
            outer.cancel()
            await anyio.Event().wait()
            raise AssertionError("unreachable")

        with cut_requests() as cut_off:
            await agent(FunctionModel(cancels_the_caller, name="explainer")).run("refund INV-1")
    assert outer.cancelled_caught
    assert cut_off == [CUT_USAGE]  # reported to the enclosing scope, not kept by the explanation's own
