"""The cause a Capabilities report carries names the deepest agent that failed, not the capability.

The capability's agent may itself be a Router, a handoff chain or another Capabilities: the
agent whose recovery stopped is then deeper than the capability, and ``error.cause`` says where.
"""

from __future__ import annotations

import pytest

from jeeves_router import Agent, Router, RouterRoute, tool
from jeeves_router.architectures.capabilities.architecture import Capabilities, Capability
from jeeves_router.architectures.react import ToolLoop
from jeeves_router.recovery import Recovery
from jeeves_router.testing import Call, RecordedSleeps, Reply, ScriptedModel, StaticClassifier
from tests.test_capabilities import Brain, plan


class CardDeclined(Exception):
    """A payment provider's refusal (CRITICAL by default)."""


def clerk(name: str) -> Agent:
    """A tool-loop agent whose second model turn fails with a CardDeclined its recovery stops on."""

    @tool
    def lookup(invoice: str) -> str:
        """Look an invoice up."""
        return f"{invoice}: 40 EUR"

    model = ScriptedModel([Reply(calls=[Call("lookup", {"invoice": "INV-7"})]), CardDeclined("card 4242 declined")])
    loop = ToolLoop(recovery=Recovery(sleep=RecordedSleeps()))
    return Agent("Refunds.", name=name, model=model, tools=[lookup], architecture=loop)


def capabilities_agent(name: str, capability: Agent, *, expose: bool = True) -> Agent:
    """A Capabilities agent with one capability, ``refunds``, run by ``capability``."""
    brain = Brain(yes={"refunds"}, plans=[plan("refunds")])
    recovery = Recovery(sleep=RecordedSleeps(), expose_details=expose)
    return Agent(
        "Back office.",
        name=name,
        model=brain.model,
        architecture=Capabilities([Capability("refunds", capability, "refunds money")], recovery=recovery),
    )


def routed(*, recovery: Recovery | None = None) -> Agent:
    """A Router agent that sends every request to the failing ``clerk``."""
    router = Router(
        [RouterRoute("clerk", clerk("clerk"), "refunds")], classifier=StaticClassifier("clerk"), recovery=recovery
    )
    return Agent("Refunds desk.", name="desk", architecture=router)


def chained() -> Agent:
    """A handoff chain whose entry hands off to the failing ``supervisor``."""
    supervisor = clerk("supervisor")
    entry = Agent(
        "Refunds.",
        name="desk",
        model=ScriptedModel([Reply(calls=[Call("transfer_to_supervisor", {})])]),
        handoffs=[supervisor],
    )
    return entry


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("shape", "capability", "deepest"),
    [
        ("router", routed, "office/refunds/clerk"),
        ("router with recovery", lambda: routed(recovery=Recovery(sleep=RecordedSleeps())), "office/refunds/clerk"),
        ("handoff chain", chained, "office/refunds/supervisor"),
        ("capabilities", lambda: capabilities_agent("inner", clerk("clerk")), "office/refunds/refunds"),
    ],
)
async def test_the_cause_path_names_the_deepest_agent_that_failed(shape: str, capability, deepest: str) -> None:
    result = await capabilities_agent("office", capability()).run("refund INV-7")
    assert result.status == "critical" and result.report is not None
    assert result.report["capability"] == "refunds"
    cause = result.report["error"]["cause"]
    assert cause["path"] == deepest
    # the rest of the cause is the deepest failure's too, not an intermediate capability's
    assert (cause["type"], cause["operation"], cause["reason"]) == ("CardDeclined", "model", "critical")
    assert cause["message"] == "card 4242 declined"


@pytest.mark.anyio
async def test_a_report_passed_on_by_a_router_names_the_member_whose_recovery_stopped() -> None:
    result = await routed().run("refund INV-7")
    assert result.status == "critical" and result.report is not None
    assert result.path == ("desk",) and result.report["path"] == "desk/clerk"


@pytest.mark.anyio
async def test_an_inner_capabilities_exposed_message_stays_out_of_an_outer_report_that_does_not_expose() -> None:
    inner = capabilities_agent("inner", clerk("clerk"), expose=True)
    result = await capabilities_agent("office", inner, expose=False).run("refund INV-7")
    assert result.report is not None
    cause = result.report["error"]["cause"]
    assert cause["path"] == "office/refunds/refunds" and "message" not in cause
    assert "4242" not in repr(result.report)
