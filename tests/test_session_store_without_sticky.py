"""A session store given without ``sticky=True`` would be ignored (only sticky sessions are kept
in it): HandoffChain, Router and HandoffRouter refuse it at construction, through one check."""

from __future__ import annotations

import pytest

from jeeves_router import Agent, HandoffChain, HandoffRouter, Router, RouterRoute, UsageError
from jeeves_router.architectures.handoffs.session import InMemorySessionStore
from jeeves_router.testing import ScriptedModel, StaticClassifier


def billing() -> Agent:
    return Agent("You are billing.", name="billing", model=ScriptedModel(["billing here."]))


def test_a_chain_refuses_a_session_store_without_sticky() -> None:
    with pytest.raises(
        UsageError,
        match=r"HandoffChain\(session_store=InMemorySessionStore\(\.\.\.\)\) was given without sticky=True.*"
        r"would be ignored; pass sticky=True.*or drop session_store",
    ):
        HandoffChain(session_store=InMemorySessionStore())


def test_a_router_refuses_a_session_store_without_sticky() -> None:
    routes = [RouterRoute("billing", billing())]
    with pytest.raises(UsageError, match=r"^Router\(session_store=InMemorySessionStore\(\.\.\.\)\) was given without"):
        Router(routes, classifier=StaticClassifier("billing"), session_store=InMemorySessionStore())
    with pytest.raises(UsageError, match=r"^HandoffRouter\(session_store=.*pass sticky=True"):
        HandoffRouter(routes, sticky=False, session_store=InMemorySessionStore())


@pytest.mark.anyio
async def test_with_sticky_the_store_is_taken_and_used() -> None:
    store = InMemorySessionStore()
    chain = HandoffChain(sticky=True, session_store=store)
    assert chain.settings.store is store and chain.options()["session_store"] is store
    desk = Router(
        [RouterRoute("billing", billing())], classifier=StaticClassifier("billing"), sticky=True, session_store=store
    )
    agent = Agent("Desk", name="desk", architecture=desk)
    assert (await agent.run("x", session_id="s")).route == "billing"
    assert await store.get("s") == "billing"
    assert HandoffChain().settings.store is None and HandoffChain(sticky=True).settings.store is not None
