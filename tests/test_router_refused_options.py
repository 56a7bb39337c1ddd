"""A Router refuses what it would silently ignore: the router agent's tools and handoffs, and a
specialist's own HandoffChain options that the Router's settings would replace."""

from __future__ import annotations

import pytest

from jeeves_router import Agent, HandoffChain, Router, RouterRoute, UsageError, tool
from jeeves_router.architectures.handoffs.session import InMemorySessionStore
from jeeves_router.testing import ScriptedModel, StaticClassifier


@tool
def lookup(invoice: str) -> str:
    """Look an invoice up."""
    return "paid"


def specialist(name: str, **kwargs: object) -> Agent:
    return Agent(f"You are {name}.", name=name, model=ScriptedModel([f"{name} here."]), **kwargs)  # type: ignore[arg-type]


def router(*routes: RouterRoute, **kwargs: object) -> Router:
    return Router(list(routes), classifier=StaticClassifier(routes[0].name), **kwargs)  # type: ignore[arg-type]


def test_tools_on_the_router_agent_are_refused() -> None:
    billing = specialist("billing")
    with pytest.raises(UsageError, match=r"router agent 'desk' has tools= \(lookup\).*give the tools to the spec"):
        Agent("Desk", name="desk", tools=[lookup], architecture=router(RouterRoute("billing", billing)))


def test_handoffs_on_the_router_agent_are_refused() -> None:
    billing, general = specialist("billing"), specialist("general")
    with pytest.raises(UsageError, match=r"router agent 'desk' has handoffs= \(general\).*RouterRoute"):
        Agent("Desk", name="desk", handoffs=[general], architecture=router(RouterRoute("billing", billing)))


def test_a_specialists_own_chain_limit_is_refused_when_the_router_would_replace_it() -> None:
    refunds = specialist("refunds")
    billing = specialist("billing", handoffs=[refunds], architecture=HandoffChain(max_handoffs=3))
    with pytest.raises(UsageError, match=r"'billing'.*HandoffChain\(max_handoffs=3\).*max_handoffs=8.*Router\(max_"):
        router(RouterRoute("billing", billing))
    # the same value on the Router: nothing is replaced
    assert router(RouterRoute("billing", billing), max_handoffs=3).settings.max_handoffs == 3


def test_a_specialists_own_fallback_is_refused_naming_the_routers_option() -> None:
    general = specialist("general")
    billing = specialist("billing", handoffs=[general], architecture=HandoffChain(fallback="general"))
    with pytest.raises(UsageError, match=r"HandoffChain\(fallback='general'\).*fallback_route=None"):
        router(RouterRoute("billing", billing), RouterRoute("general", general))
    router(RouterRoute("billing", billing), RouterRoute("general", general), fallback_route="general")


@pytest.mark.anyio
async def test_an_agent_reached_by_a_handoff_is_checked_before_the_run_starts() -> None:
    refunds_model = ScriptedModel(["Refunded."])
    refunds = Agent(
        "Refunds.",
        name="refunds",
        model=refunds_model,
        handoffs=[specialist("ledger")],
        architecture=HandoffChain(max_edge_traversals=5),
    )
    billing = specialist("billing", handoffs=[refunds])
    desk = Agent("Desk", name="desk", architecture=router(RouterRoute("billing", billing)))
    with pytest.raises(UsageError, match=r"'refunds'.*max_edge_traversals=5"):
        await desk.run("refund me")
    assert refunds_model.requests == []


@pytest.mark.anyio
async def test_specialists_with_plain_handoffs_still_run_under_the_routers_settings() -> None:
    refunds = specialist("refunds")
    billing = Agent("Billing.", name="billing", model=ScriptedModel(["Billing answers."]), handoffs=[refunds])
    desk = Agent("Desk", name="desk", architecture=router(RouterRoute("billing", billing), max_handoffs=2))
    result = await desk.run("invoice?")
    assert result.status == "ok" and result.output == "Billing answers."


def test_sticky_specialists_with_their_own_session_stores_are_refused() -> None:
    """One Router keeps one sticky store: a specialist's own store would be silently replaced by it."""
    mine, theirs = InMemorySessionStore(), InMemorySessionStore()
    refunds = specialist("refunds")
    billing = specialist("billing", handoffs=[refunds], architecture=HandoffChain(sticky=True, session_store=mine))
    general = specialist("general", handoffs=[refunds], architecture=HandoffChain(sticky=True, session_store=theirs))
    # the Router's own (default) store would be used instead of billing's
    with pytest.raises(UsageError, match=r"'billing'.*session_store=InMemorySessionStore.*Router\(session_store="):
        router(RouterRoute("billing", billing), RouterRoute("general", general), sticky=True)
    # billing's store on the Router: then general's, a different one, is refused
    with pytest.raises(UsageError, match=r"'general'.*HandoffChain\(session_store=InMemorySessionStore"):
        router(RouterRoute("billing", billing), RouterRoute("general", general), sticky=True, session_store=mine)
    # the same store on both specialists and the Router: nothing is replaced
    same = specialist("general", handoffs=[refunds], architecture=HandoffChain(sticky=True, session_store=mine))
    desk = router(RouterRoute("billing", billing), RouterRoute("general", same), sticky=True, session_store=mine)
    assert desk.settings.store is mine
    # sticky specialists without a store of their own take the Router's
    plain = specialist("general", handoffs=[refunds], architecture=HandoffChain(sticky=True))
    router(RouterRoute("billing", plain), sticky=True)
