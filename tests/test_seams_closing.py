"""Seams: a consumer closes a run (``break`` out of ``agent.stream()``) and a clean-up fails.

A model stream whose close raises (an HTTP response that fails to close) used to make the
run emit ``run.failed`` in the middle of the close, which the stream turned into its own
``RuntimeError("a run emitted an event while it was being closed")``, hiding the cause. A
failure during a close now ends the close with its own exception, as an async generator's
``aclose()`` does, and nothing is emitted to a consumer that has left.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from jeeves_router import Agent, Router, RouterRoute
from jeeves_router.messages import TextPart
from jeeves_router.models.base import ModelRequest, ModelResponse, ModelStreamItem, ModelTextDelta
from jeeves_router.testing import ScriptedModel, StaticClassifier


class ClosingFails:
    """Streams two deltas; closing the stream raises (the connection reset while closing)."""

    name = "test:closing-fails"

    async def request(self, request: ModelRequest) -> ModelResponse:
        raise NotImplementedError

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        try:
            yield ModelTextDelta("first ")
            yield ModelTextDelta("second")
            yield ModelResponse((TextPart("first second"),))
        finally:
            raise ConnectionResetError("connection reset while closing")


def billing() -> Agent:
    return Agent("Billing.", name="billing", model=ClosingFails())


@pytest.mark.anyio
@pytest.mark.parametrize("routed", [False, True], ids=["agent", "router"])
async def test_a_clean_up_that_fails_as_the_consumer_leaves_ends_the_close_with_its_own_error(routed: bool) -> None:
    agent = billing()
    if routed:
        agent = Agent(
            "Desk",
            name="desk",
            architecture=Router([RouterRoute("billing", agent)], classifier=StaticClassifier("billing")),
        )
    kinds: list[str] = []
    with pytest.raises(ConnectionResetError, match="connection reset while closing"):
        async with agent.stream("refund please", session_id="s1") as events:
            async for ev in events:
                kinds.append(ev.kind)
                if ev.kind == "text.delta":
                    break
    assert kinds[-1] == "text.delta" and "run.failed" not in kinds

    # the close is over: a later run's failure is reported as events again
    failing = Agent("Billing.", name="billing", model=ScriptedModel([ValueError("bad reply")]))
    seen: list[str] = []
    with pytest.raises(ValueError, match="bad reply"):
        async with failing.stream("again", session_id="s2") as events:
            async for ev in events:
                seen.append(ev.kind)
    assert seen[-1] == "run.failed"
