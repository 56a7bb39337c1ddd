"""A Capabilities agent refuses the tools and handoffs it would silently ignore (the Router's shared check)."""

from __future__ import annotations

import pytest

from jeeves_router import Agent, UsageError, tool
from jeeves_router.architectures.capabilities.architecture import Capabilities, Capability
from jeeves_router.testing import ScriptedModel


@tool
def lookup(invoice: str) -> str:
    """Look an invoice up."""
    return "paid"


def worker(name: str, **kwargs: object) -> Agent:
    return Agent(f"You are {name}.", name=name, model=ScriptedModel([f"{name} here."]), **kwargs)  # type: ignore[arg-type]


def capabilities() -> Capabilities:
    return Capabilities([Capability("billing", worker("billing"), "payments")])


def test_tools_on_the_capabilities_agent_are_refused() -> None:
    with pytest.raises(
        UsageError,
        match=r"capabilities agent 'desk' has tools= \(lookup\), which it would never call.*Capability\(name, Agent",
    ):
        Agent("Desk", name="desk", model=ScriptedModel(["x"]), tools=[lookup], architecture=capabilities())


def test_handoffs_on_the_capabilities_agent_are_refused() -> None:
    with pytest.raises(
        UsageError, match=r"capabilities agent 'desk' has handoffs= \(general\), which it would never use.*Capability"
    ):
        Agent(
            "Desk", name="desk", model=ScriptedModel(["x"]), handoffs=[worker("general")], architecture=capabilities()
        )


def test_a_capabilitys_own_agent_keeps_its_tools_and_handoffs() -> None:
    billing = worker("billing", tools=[lookup], handoffs=[worker("refunds")])
    desk = Agent(
        "Desk",
        name="desk",
        model=ScriptedModel(["x"]),
        architecture=Capabilities([Capability("billing", billing, "payments")]),
    )
    assert desk.architecture.capabilities[0].handler is billing  # type: ignore[attr-defined]
