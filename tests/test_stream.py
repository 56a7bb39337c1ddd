"""Streams close cleanly and failures surface with their original type."""

from __future__ import annotations

import asyncio
import contextlib
import gc

import pytest

from jeeves_router import Agent, Router, RouterRoute, RunFailed
from jeeves_router.events import Event
from jeeves_router.messages import user
from jeeves_router.models.base import ModelRequest
from jeeves_router.testing import Chunks, FunctionModel, Reply, ScriptedModel
from tests.task_helpers import pending_tasks, settled_tasks, warnings_of_this_test

pytestmark = pytest.mark.anyio


class Boom(Exception):
    pass


def make_desk(specialist_step: object) -> tuple[Agent, ScriptedModel]:
    spec_model = ScriptedModel([specialist_step])  # type: ignore[list-item]
    billing = Agent("b", name="billing", model=spec_model)
    desk = Agent(
        "d",
        name="desk",
        model=ScriptedModel(["route: billing\nconfidence: 0.9"]),
        architecture=Router([RouterRoute("billing", billing)]),
    )
    return desk, spec_model


async def test_break_then_aclose() -> None:
    desk, _ = make_desk(Chunks(*[f"w{i} " for i in range(50)]))
    before = await settled_tasks()
    with warnings_of_this_test("error"):
        stream = desk.stream("x")
        seen = 0
        async for ev in stream:
            if ev.kind == "text.delta":
                seen += 1
                if seen == 3:
                    break
        await stream.aclose()
        gc.collect()
    assert seen == 3
    assert pending_tasks() <= before
    assert stream.result is None  # not finished


async def test_contextlib_aclosing() -> None:
    desk, _ = make_desk(Chunks("a", "b", "c"))
    with warnings_of_this_test("error"):
        async with contextlib.aclosing(desk.stream("x")) as stream:
            async for ev in stream:
                if ev.kind == "router.dispatched":
                    break
        gc.collect()


async def test_async_with_form_and_result() -> None:
    desk, _ = make_desk(Chunks("a", "b"))
    async with desk.stream("x", session_id="s") as events:
        kinds = [ev.kind async for ev in events]
    assert kinds[0] == "run.started" and kinds[-1] == "run.completed"
    assert events.result is not None and events.result.output == "ab"


async def test_break_without_aclose_leaves_nothing_running() -> None:
    desk, _ = make_desk(Chunks("a", "b", "c"))
    before = await settled_tasks()
    with warnings_of_this_test("error"):
        async for ev in desk.stream("x"):
            if ev.kind == "text.delta":
                break
        gc.collect()
        await asyncio.sleep(0)
        await asyncio.sleep(0)
    assert pending_tasks() <= before


async def test_specialist_exception_reaches_run_caller_as_original_type() -> None:
    desk, _ = make_desk(Boom("specialist broke"))
    with pytest.raises(Boom, match="specialist broke"):
        await desk.run("x")


async def test_specialist_exception_is_a_run_failed_event_in_stream_then_raised() -> None:
    desk, _ = make_desk(Boom("specialist broke"))
    events: list[Event] = []
    with pytest.raises(Boom, match="specialist broke"):
        async for ev in desk.stream("x", session_id="s"):
            events.append(ev)
    failed = [e for e in events if isinstance(e, RunFailed)]
    assert [f.path for f in failed] == [("desk", "billing"), ("desk",)]
    # the event names the type; its message only under Recovery(expose_details=True) (the exception keeps it)
    assert failed[-1].error_type == "Boom" and failed[-1].message == ""
    assert events[-1] is failed[-1]


async def test_cancelling_a_run_propagates_cleanly() -> None:
    import anyio

    class Slow:
        name = "test:slow"

        async def request(self, request: object) -> object:
            raise NotImplementedError

        async def stream(self, request: object):  # type: ignore[no-untyped-def]
            await anyio.sleep(30)
            yield None

    agent = Agent("s", name="slow", model=Slow())  # type: ignore[arg-type]
    with anyio.move_on_after(0.05) as scope:
        await agent.run("x")
    assert scope.cancelled_caught


async def test_failed_stream_reports_error_and_no_result() -> None:
    desk, _ = make_desk(Boom("specialist broke"))
    stream = desk.stream("x")
    kinds: list[str] = []
    with pytest.raises(Boom):
        async with stream:
            async for ev in stream:
                kinds.append(ev.kind)
    assert kinds[-1] == "run.failed"
    assert isinstance(stream.error, Boom) and stream.result is None


async def test_a_scripted_reply_can_fail_after_its_chunks() -> None:
    """``Reply(..., error=)``: the stream yields its chunks, then raises (a connection dropped mid-answer)."""
    desk, spec_model = make_desk(Reply(Chunks("Refund ", "iss"), error=Boom("dropped")))
    seen: list[Event] = []
    with pytest.raises(Boom, match="dropped"):
        async for ev in desk.stream("refund please"):
            seen.append(ev)
    assert [getattr(ev, "text", None) for ev in seen if ev.kind == "text.delta"] == ["Refund ", "iss"]
    assert seen[-1].kind == "run.failed"
    spec_model.assert_complete()
    # a plain request of the same step raises at once: there is no stream to break
    plain = ScriptedModel([Reply("never sent", error=Boom("refused"))])
    with pytest.raises(Boom, match="refused"):
        await plain.request(ModelRequest(messages=(user("hi"),)))


@pytest.mark.parametrize("text", [Chunks("Refund ", "iss"), "Refund iss"], ids=["chunks", "text"])
async def test_a_function_models_reply_can_fail_after_its_text_as_a_scripted_one_does(text: object) -> None:
    """``FunctionModel`` honours ``Reply(..., error=)`` too: it used to complete the reply as if nothing failed."""
    model = FunctionModel(lambda request: Reply(text, error=Boom("dropped")))  # type: ignore[arg-type]
    agent = Agent("Billing.", name="billing", model=model)
    seen: list[Event] = []
    with pytest.raises(Boom, match="dropped"):
        async for ev in agent.stream("refund please"):
            seen.append(ev)
    assert "".join(getattr(ev, "text", "") for ev in seen if ev.kind == "text.delta") == "Refund iss"
    assert [ev.kind for ev in seen][-2:] == ["text.delta", "run.failed"]
    with pytest.raises(Boom, match="dropped"):  # a plain request raises at once
        await model.request(ModelRequest(messages=(user("hi"),)))
