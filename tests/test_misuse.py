"""Mistakes a new user makes with the public constructors: each is a ``UsageError`` that says what to change."""

from __future__ import annotations

import pytest

from jeeves_router import Agent, Handoff, UsageError
from jeeves_router.testing import ScriptedModel


def test_a_handoff_to_an_agent_object_names_the_agent_to_pass_instead() -> None:
    billing = Agent("You resolve payments.", name="billing", model=ScriptedModel([]))
    with pytest.raises(UsageError, match=r"Handoff target must be an agent or route name \(a string\), got Agent\("):
        Handoff(target=billing)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r": pass its name, Handoff\(target='billing'\)"):
        Handoff(billing)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"got ''"):
        Handoff("")
    assert Handoff("billing", reason="refund") == Handoff(target="billing", reason="refund")
