"""The event pump: one flat path from ``await emit(x)`` at any depth to the consumer."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest

from jeeves_router._aio import EventPump, emit

pytestmark = pytest.mark.anyio


class Item(str):
    """The pumped type (anything else yielded is a wait for the event loop)."""


async def nested(log: list[str], depth: int) -> None:
    await emit(Item(f"enter {depth}"))
    await anyio.lowlevel.checkpoint()  # a wait in the middle of the chain goes to the event loop
    if depth:
        await nested(log, depth - 1)
    await emit(Item(f"leave {depth}"))
    log.append(f"done {depth}")


async def test_items_from_every_depth_arrive_in_order_and_waits_pass_through() -> None:
    log: list[str] = []
    items = [x async for x in EventPump(nested(log, 2), Item)]
    assert items == ["enter 2", "enter 1", "enter 0", "leave 0", "leave 1", "leave 2"]
    assert log == ["done 0", "done 1", "done 2"]


async def test_the_run_advances_only_when_the_next_item_is_pulled() -> None:
    log: list[str] = []
    pump = EventPump(nested(log, 1), Item)
    assert await pump.__anext__() == "enter 1"
    assert await pump.__anext__() == "enter 0"
    assert log == []
    await pump.aclose()


async def test_a_failure_is_raised_after_the_items_before_it_and_kept() -> None:
    async def failing() -> None:
        await emit(Item("before"))
        raise LookupError("boom")

    pump = EventPump(failing(), Item)
    seen = []
    with pytest.raises(LookupError, match="boom"):
        async for x in pump:
            seen.append(x)
    assert seen == ["before"] and isinstance(pump.error, LookupError)
    with pytest.raises(StopAsyncIteration):
        await pump.__anext__()


async def test_aclose_runs_finally_blocks_that_await() -> None:
    closed: list[str] = []

    async def run() -> None:
        try:
            await emit(Item("one"))
            await emit(Item("two"))
        finally:
            await anyio.lowlevel.checkpoint()
            closed.append("cleaned")

    pump = EventPump(run(), Item)
    assert await pump.__anext__() == "one"
    await pump.aclose()
    assert closed == ["cleaned"]
    await pump.aclose()  # idempotent


async def test_emitting_while_closing_is_an_error() -> None:
    async def stubborn() -> None:
        try:
            await emit(Item("one"))
        finally:
            await emit(Item("again"))

    pump = EventPump(stubborn(), Item)
    await pump.__anext__()
    with pytest.raises(RuntimeError, match="while it was being closed"):
        await pump.aclose()


async def test_drain_discards_the_items_and_runs_to_the_end() -> None:
    log: list[str] = []
    await EventPump(nested(log, 3), Item).drain()
    assert log == ["done 0", "done 1", "done 2", "done 3"]


async def test_cancellation_reaches_the_run_at_its_await_point() -> None:
    reached: list[str] = []

    async def slow() -> None:
        await emit(Item("start"))
        try:
            await anyio.sleep(30)
        except anyio.get_cancelled_exc_class():
            reached.append("cancelled")
            raise

    pump = EventPump(slow(), Item)
    with anyio.move_on_after(0.01) as scope:
        async for _ in pump:
            pass
    assert scope.cancelled_caught and reached == ["cancelled"]
