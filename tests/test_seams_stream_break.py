"""Seams: a consumer that leaves ``agent.stream()`` of a Router mid-way.

Over a provider's adapter (the OpenAI or Anthropic SDK on the loopback server), whose HTTP
stream awaits as it closes: leaving mid-answer (``break`` then ``aclose()``, or ``async
with``) closes the run cleanly. It used to raise ``RuntimeError: coroutine ignored
GeneratorExit`` from ``aclose()``: the run was closed by throwing ``GeneratorExit`` into it,
which Python turns into ``coroutine.close()`` down the chain of awaits, where no clean-up may
await.
"""

from __future__ import annotations

import gc

import anyio.lowlevel
import pytest

from jeeves_router import Agent, Router, RouterRoute
from jeeves_router.agent import RunStream
from jeeves_router.models.anthropic import AnthropicModel
from jeeves_router.models.openai import OpenAIModel
from jeeves_router.policies import RetryPolicy
from jeeves_router.recovery import Recovery
from jeeves_router.testing import RecordedSleeps, StaticClassifier
from tests.loopback import LoopbackServer, Status, loopback  # noqa: F401  (fixture)
from tests.loopback import Reply as WireReply
from tests.task_helpers import pending_tasks, settled_tasks, warnings_of_this_test


async def leave_after(stream: RunStream, kind: str, nth: int, how: str) -> list[str]:
    """Read ``stream`` up to its ``nth`` event of ``kind``, then close it ``how``; the kinds read."""
    kinds: list[str] = []

    async def read() -> None:
        async for ev in stream:
            kinds.append(ev.kind)
            if ev.kind == kind and kinds.count(kind) == nth:
                break

    if how == "async with":
        async with stream:
            await read()
    else:
        await read()
        await stream.aclose()
    return kinds


def wire_model(server: LoopbackServer, provider: str) -> OpenAIModel | AnthropicModel:
    """The provider's adapter on the loopback server; it retries a 503 once itself."""
    policy = RetryPolicy(max_attempts=2, initial_delay_s=0.5, jitter=0.0)
    if provider == "openai":
        return OpenAIModel("gpt-4.1-mini", client=server.openai_client(), retry=policy, sleep=RecordedSleeps())
    return AnthropicModel("claude-haiku-4-5", client=server.anthropic_client(), retry=policy, sleep=RecordedSleeps())


@pytest.mark.anyio
@pytest.mark.parametrize("how", ["aclose", "async with"])
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_leaving_a_routed_wire_stream_mid_answer_closes_it_cleanly(
    loopback: LoopbackServer,  # noqa: F811
    provider: str,
    how: str,
) -> None:
    loopback.script(Status(503), WireReply(text=["Refund ", "done."]))
    billing = Agent("Billing.", name="billing", model=wire_model(loopback, provider))
    router = Router([RouterRoute("billing", billing)], classifier=StaticClassifier("billing"), recovery=Recovery())
    agent = Agent("Desk", name="desk", architecture=router)
    before = await settled_tasks()
    with warnings_of_this_test("error"):
        stream = agent.stream("refund INV-7")
        kinds = await leave_after(stream, "text.delta", 1, how)
        await loopback.aclose_clients()
        gc.collect()  # the SDK's own iterator, left to the loop's finaliser: its aclose() is a task
        await anyio.lowlevel.checkpoint()
    assert kinds[-1] == "text.delta" and stream.error is None
    assert pending_tasks() <= before
    assert len(loopback.requests) == 2  # the adapter's retry of the 503; the ladder saw no failure
    assert "recovery.retry" not in kinds
