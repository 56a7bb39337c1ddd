"""A capability agent that its own recovery stopped (``critical``): the outer report carries the
inner cause (error type, message when exposed, the inner step), not only the status."""

from __future__ import annotations

import pytest

from jeeves_router import Agent, Router, RouterRoute, tool
from jeeves_router.architectures.capabilities.architecture import Capabilities, Capability
from jeeves_router.architectures.react import ToolLoop
from jeeves_router.recovery import Recovery
from jeeves_router.testing import Call, RecordedSleeps, Reply, ScriptedModel, StaticClassifier
from tests.test_capabilities import Brain, plan


class CardDeclined(Exception):
    """A payment provider's refusal (CRITICAL by default: not a network error)."""


def refunds_desk(*, expose_details: bool, shape: str = "agent") -> Agent:
    @tool
    def lookup(invoice: str) -> str:
        """Look an invoice up."""
        return f"{invoice}: 40 EUR"

    inner = ScriptedModel(
        [Reply(calls=[Call("lookup", {"invoice": "INV-7"})]), CardDeclined("card ending 4242 declined")]
    )
    loop = ToolLoop(recovery=Recovery(sleep=RecordedSleeps()))
    if shape == "agent":
        refunds = Agent("Refunds.", name="refunds", model=inner, tools=[lookup], architecture=loop)
    elif shape == "handoffs":  # an agent that may hand off runs as a HandoffChain of its loop
        supervisor = Agent("Supervisor.", name="supervisor", model=ScriptedModel(["Approved."]))
        refunds = Agent(
            "Refunds.", name="refunds", model=inner, tools=[lookup], handoffs=[supervisor], architecture=loop
        )
    else:  # a Router whose specialist stops
        clerk = Agent("Refunds.", name="clerk", model=inner, tools=[lookup], architecture=loop)
        router = Router([RouterRoute("clerk", clerk, "refunds")], classifier=StaticClassifier("clerk"))
        refunds = Agent("Refunds desk.", name="refunds", architecture=router)
    brain = Brain(yes={"refunds"}, plans=[plan("refunds")])
    recovery = Recovery(sleep=RecordedSleeps(), expose_details=expose_details)
    return Agent(
        "Back office.",
        name="office",
        model=brain.model,
        architecture=Capabilities([Capability("refunds", refunds, "refunds money")], recovery=recovery),
    )


@pytest.mark.anyio
async def test_the_outer_report_names_the_inner_error_and_step() -> None:
    result = await refunds_desk(expose_details=True).run("refund INV-7")
    assert result.status == "critical" and result.report is not None
    report = result.report
    assert report["capability"] == "refunds" and report["operation"] == "capability:refunds"
    assert report["error"]["cause"] == {
        "type": "CardDeclined",
        "operation": "model",
        "reason": "critical",
        "severity": "critical",
        "path": "office/refunds",
        "message": "card ending 4242 declined",
    }
    assert "CardDeclined at step 'model'" in report["error"]["message"]


@pytest.mark.anyio
async def test_the_inner_message_stays_out_unless_details_are_exposed() -> None:
    result = await refunds_desk(expose_details=False).run("refund INV-7")
    assert result.report is not None
    cause = result.report["error"]["cause"]
    assert cause["type"] == "CardDeclined" and cause["operation"] == "model" and "message" not in cause
    assert "4242" not in repr(result.report)


@pytest.mark.anyio
@pytest.mark.parametrize("shape", ["handoffs", "router"])
async def test_the_inner_message_comes_through_a_chain_or_router_capability_agent(shape: str) -> None:
    # the agent that stopped is a chain member or a routed specialist: its failure is the capability agent's
    result = await refunds_desk(expose_details=True, shape=shape).run("refund INV-7")
    assert result.status == "critical" and result.report is not None
    cause = result.report["error"]["cause"]
    assert (cause["type"], cause["operation"]) == ("CardDeclined", "model")
    assert cause["message"] == "card ending 4242 declined"
