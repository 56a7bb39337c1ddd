"""``Recovery(time_limit_s=...)`` bounds a streamed model call: each wait for the next chunk.

A stream cannot run inside one time box (the box would stay open across every yield to the
consumer), so the tool loop boxes each wait for a chunk with the time the run has left. A
provider that stalls mid-stream is cut when the limit passes; closing the stream early
(``break``, ``aclose()``) stays clean. The limits here are a fraction of a second of real
time; what is asserted is that the run stopped and how, never how long it took.
"""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import anyio
import pytest

from jeeves_router import Agent
from jeeves_router.architectures.react import ToolLoop
from jeeves_router.events import RecoveryReport, RecoveryRetry, TextDelta
from jeeves_router.journal import JournalRuntime, SQLiteJournal
from jeeves_router.messages import TextPart
from jeeves_router.models.base import ModelRequest, ModelResponse, ModelStreamItem, ModelTextDelta
from jeeves_router.recovery import Recovery
from jeeves_router.testing import RecordedSleeps, capture_events
from jeeves_router.usage import Usage
from tests.recovery_clock import Clock
from tests.task_helpers import warnings_of_this_test

LIMIT = 0.3  # real seconds the stalled stream waits before the run's limit cuts it
GUARD = 10.0  # only so that a regression fails instead of hanging the suite


class StallingModel:
    """Streams ``chunks`` then, while ``stall`` is set, never sends the next one (a hung provider)."""

    def __init__(
        self, *chunks: str, stall: bool = True, clock: Clock | None = None, on_stall: Callable[[], None] | None = None
    ) -> None:
        self.chunks, self.stall, self.clock, self.on_stall = chunks, stall, clock, on_stall
        self.calls = 0
        self.closed = 0

    @property
    def name(self) -> str:
        return "test:stalling"

    async def request(self, request: ModelRequest) -> ModelResponse:
        raise AssertionError("the tool loop streams")

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        self.calls += 1
        try:
            for text in self.chunks:
                yield ModelTextDelta(text)
            if self.stall:
                if self.clock is not None:
                    self.clock.release()  # the run's time passes from here on
                if self.on_stall is not None:
                    self.on_stall()
                await anyio.sleep_forever()
            text = TextPart("".join(self.chunks))
            yield ModelResponse((text,), Usage(input_tokens=3, output_tokens=2, requests=1))
        finally:
            self.closed += 1


def agent(model: StallingModel, runtime: JournalRuntime | None = None) -> Agent:
    recovery = Recovery(time_limit_s=LIMIT, sleep=RecordedSleeps())
    return Agent("Billing.", name="billing", model=model, architecture=ToolLoop(recovery=recovery), runtime=runtime)


@pytest.mark.anyio
async def test_a_stream_that_stalls_mid_way_is_stopped_by_the_time_limit(clock: Clock) -> None:
    model = StallingModel("Your invoice ", clock=clock)
    clock.hold()  # the limit starts passing where the stream stalls, however slow the machine is up to there
    with anyio.fail_after(GUARD):
        events = await capture_events(agent(model), "is INV-7 paid?")
    res = events[-1].result  # type: ignore[union-attr]
    assert res.status == "critical" and res.report["reason"] == "time_limit"
    assert res.report["operation"] == "model" and res.report["error"]["type"] == "TimeoutError"
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Your invoice "]  # what came before the stall
    assert [e for e in events if isinstance(e, RecoveryRetry)] == []  # the limit is spent: stopped, not retried
    assert len([e for e in events if isinstance(e, RecoveryReport)]) == 1
    assert (model.calls, model.closed) == (1, 1)  # the provider's stream was closed


@pytest.mark.anyio
async def test_a_stream_that_stalls_before_its_first_chunk_is_stopped_too(clock: Clock) -> None:
    model = StallingModel(clock=clock)
    clock.hold()
    with anyio.fail_after(GUARD):
        res = await agent(model).run("is INV-7 paid?")
    assert res.status == "critical" and res.report["reason"] == "time_limit"
    assert (model.calls, model.closed) == (1, 1)


@pytest.mark.anyio
async def test_a_stream_within_the_limit_runs_to_its_end() -> None:
    model = StallingModel("Paid", " twice.", stall=False)
    with anyio.fail_after(GUARD):
        res = await agent(model).run("is INV-7 paid?")
    assert res.status == "ok" and res.output == "Paid twice."
    assert model.closed == 1


@pytest.mark.anyio
@pytest.mark.parametrize("how", ["break", "aclose"])
async def test_closing_a_time_limited_stream_early_is_clean(how: str) -> None:
    model = StallingModel("Your invoice ", stall=True)
    with warnings_of_this_test() as caught:
        with anyio.fail_after(GUARD):
            if how == "break":
                async with agent(model).stream("is INV-7 paid?") as events:
                    async for ev in events:
                        if isinstance(ev, TextDelta):
                            break
            else:
                stream = agent(model).stream("is INV-7 paid?")
                async for ev in stream:
                    if isinstance(ev, TextDelta):
                        await stream.aclose()
                        break
        gc.collect()
    assert [str(w.message) for w in caught] == []
    assert (model.calls, model.closed) == (1, 1)


@pytest.mark.anyio
async def test_a_stream_cut_by_the_limit_resumes_to_the_same_stop_without_a_call(tmp_path: Path, clock: Clock) -> None:
    model = StallingModel("Your invoice ", clock=clock)
    async with SQLiteJournal(tmp_path / "j.db") as journal:
        desk = agent(model, JournalRuntime(journal))
        clock.hold()
        with anyio.fail_after(GUARD):
            first = await desk.run("is INV-7 paid?", session_id="s")
        assert first.status == "critical" and first.report["reason"] == "time_limit"
        with anyio.fail_after(GUARD):
            replayed = await desk.resume("s")
    assert model.calls == 1  # the cut attempt is not sent to the model again
    assert (replayed.status, replayed.report["reason"]) == ("critical", "time_limit")
    assert replayed.report["error"] == first.report["error"]


def routed(model: StallingModel, *, specialist_limit: bool) -> Agent:
    from jeeves_router import Router, RouterRoute
    from jeeves_router.testing import StaticClassifier

    arch = ToolLoop(recovery=Recovery(time_limit_s=LIMIT, sleep=RecordedSleeps())) if specialist_limit else None
    billing = Agent("Billing.", name="billing", model=model, architecture=arch)
    router = Router([RouterRoute("billing", billing)], classifier=StaticClassifier("billing"))
    return Agent("Desk.", name="desk", architecture=router)


@pytest.mark.anyio
async def test_a_specialists_own_time_limit_stops_its_stalled_stream_behind_a_router(clock: Clock) -> None:
    model = StallingModel("Your invoice ", clock=clock)
    clock.hold()
    with anyio.fail_after(GUARD):
        res = await routed(model, specialist_limit=True).run("is INV-7 paid?")
    assert (res.route, res.status, res.report["reason"]) == ("billing", "critical", "time_limit")
    assert (model.calls, model.closed) == (1, 1)


@pytest.mark.anyio
async def test_a_scope_around_the_whole_stream_stops_a_stalled_specialist_cleanly() -> None:
    """What a Router's own time limit cannot do (see README): bound the request from outside."""
    texts: list[str] = []
    with warnings_of_this_test() as caught:
        with anyio.move_on_after(GUARD) as scope:
            # the deadline is set where the provider stalls, so a slow machine cannot pass it sooner
            model = StallingModel("Your invoice ", on_stall=lambda: setattr(scope, "deadline", anyio.current_time()))
            async with routed(model, specialist_limit=False).stream("is INV-7 paid?") as events:
                async for ev in events:
                    if isinstance(ev, TextDelta):
                        texts.append(ev.text)
        gc.collect()
    assert scope.cancelled_caught and texts == ["Your invoice "]
    assert [str(w.message) for w in caught] == []
    assert (model.calls, model.closed) == (1, 1)
