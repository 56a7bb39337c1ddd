"""An in-flight run holds one coroutine per layer that does work: no pass-through layers.

The chain of awaits of a routed run, parked in a model call, is read from the stream's
coroutine (``cr_await``). These tests pin that chain, so a wrapper coroutine that only
forwards (and costs a frame per in-flight run, plus a step per event) is not added back.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from jeeves_router import Agent, Router, RouterRoute
from jeeves_router.messages import TextPart
from jeeves_router.models.base import ModelRequest, ModelResponse, ModelStreamItem, ModelTextDelta
from jeeves_router.runtime import PASS_THROUGH, StepKey
from jeeves_router.testing import StaticClassifier
from jeeves_router.usage import Usage

pytestmark = pytest.mark.anyio

_ANSWER = "Refunded."


class GatedModel:
    """Answers (streamed or not) once ``gate`` is set; ``parked`` is set while it waits."""

    name = "test:gated"

    def __init__(self, reply: str) -> None:
        self.gate = anyio.Event()
        self.parked = anyio.Event()
        self._response = ModelResponse((TextPart(reply),), Usage(requests=1), "end", "gated")

    async def request(self, request: ModelRequest) -> ModelResponse:
        self.parked.set()
        await self.gate.wait()
        return self._response

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        self.parked.set()
        await self.gate.wait()
        yield ModelTextDelta(_ANSWER)
        yield self._response


def awaited_chain(coro: Any) -> list[str]:
    """The qualified names of the coroutines ``coro`` awaits through, outermost first."""
    names = []
    while coro is not None and hasattr(coro, "cr_code"):
        names.append(coro.__qualname__)  # (code objects carry it only from Python 3.11)
        coro = coro.cr_await
    return names


async def test_a_routed_run_parked_in_its_specialist_holds_four_engine_coroutines() -> None:
    specialist = GatedModel(_ANSWER)
    billing = Agent("b", name="billing", model=specialist)
    desk = Agent(
        "d", name="desk", architecture=Router([RouterRoute("billing", billing)], classifier=StaticClassifier("billing"))
    )
    kinds: list[str] = []
    async with anyio.create_task_group() as tg:
        stream = desk.stream("I was charged twice")
        first = await stream.__anext__()
        kinds.append(first.kind)

        async def rest() -> None:
            async for ev in stream:
                kinds.append(ev.kind)

        tg.start_soon(rest)
        await specialist.parked.wait()
        chain = awaited_chain(stream._coro)
        specialist.gate.set()
    assert chain == ["execute", "ChainRun.run", "execute", "ToolLoop._loop"]
    assert kinds[0] == "run.started" and kinds[-1] == "run.completed" and "text.delta" in kinds


async def test_a_run_parked_in_its_classification_holds_no_forwarding_coroutine() -> None:
    classifier_model = GatedModel("route: billing\nconfidence: 0.9")
    billing = Agent("b", name="billing", model=GatedModel(_ANSWER))
    billing.resolved_model().gate.set()  # type: ignore[attr-defined]
    desk = Agent("d", name="desk", model=classifier_model, architecture=Router([RouterRoute("billing", billing)]))
    kinds: list[str] = []
    async with anyio.create_task_group() as tg:
        stream = desk.stream("I was charged twice")

        async def run() -> None:
            async for ev in stream:
                kinds.append(ev.kind)

        tg.start_soon(run)
        await classifier_model.parked.wait()
        chain = awaited_chain(stream._coro)
        classifier_model.gate.set()
    # the router's run, then the classifier itself: no Router.classify / runtime step / closure layer
    assert chain[:3] == ["execute", "ChainRun.run", "RouterRun._classify"]
    assert chain[3] == "LLMClassifier.classify"
    assert kinds[-1] == "run.completed"


async def test_the_pass_through_runtime_returns_the_step_itself() -> None:
    async def answer() -> int:
        return 42

    step = answer()
    assert PASS_THROUGH.step(StepKey("s", "0", "x", 0), {}, lambda: step) is step
    assert await step == 42


async def test_a_run_parked_in_a_plain_specialist_turn_holds_no_visit_object() -> None:
    import gc

    from jeeves_router.architectures.handoffs.visit import Visit

    specialist = GatedModel(_ANSWER)
    billing = Agent("b", name="billing", model=specialist)
    desk = Agent(
        "d", name="desk", architecture=Router([RouterRoute("billing", billing)], classifier=StaticClassifier("billing"))
    )
    async with anyio.create_task_group() as tg:
        stream = desk.stream("I was charged twice")

        async def run() -> None:
            async for _ in stream:
                pass

        tg.start_soon(run)
        await specialist.parked.wait()
        visits = [o for o in gc.get_objects() if type(o) is Visit and o.node.agent is billing]  # this run's
        specialist.gate.set()
    assert visits == []  # made again from the turn's context once it ends, not held while it runs
    assert stream.result is not None and stream.result.route == "billing" and stream.result.output == _ANSWER
