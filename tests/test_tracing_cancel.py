"""A cancelled model call, streamed or not: the same ``chat`` span, not marked as failed (OpenTelemetry status)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import anyio
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from jeeves_router.messages import TextPart
from jeeves_router.models.base import ModelResponse, ModelStreamItem, ModelTextDelta
from jeeves_router.tracing import traced_model_call, traced_model_stream
from tests.test_tracing import attrs, by_name, spans  # noqa: F401  (fixture)

pytestmark = pytest.mark.anyio


async def _cancel_when_started(work: Any, started: anyio.Event) -> None:
    """Run ``work()`` in a task and cancel it once it is waiting for the model."""
    async with anyio.create_task_group() as tg:
        tg.start_soon(work)
        await started.wait()
        tg.cancel_scope.cancel()


async def test_a_cancelled_call_and_a_cancelled_stream_are_not_errors(spans: InMemorySpanExporter) -> None:  # noqa: F811
    called, streaming = anyio.Event(), anyio.Event()

    async def never_answers(attempt: int) -> object:
        called.set()
        await anyio.sleep_forever()

    async def stream() -> AsyncIterator[ModelTextDelta]:
        yield ModelTextDelta("Refund ")
        streaming.set()
        await anyio.sleep_forever()
        yield ModelTextDelta("issued.")  # never reached

    async def consume() -> None:
        async for _ in traced_model_stream("test:streamed", 1, stream()):
            pass

    await _cancel_when_started(lambda: traced_model_call("test:called", 1, never_answers), called)
    await _cancel_when_started(consume, streaming)

    for name in ("chat called", "chat streamed"):
        [span] = by_name(spans, name)
        assert span.end_time is not None
        assert span.status.status_code is StatusCode.UNSET, (name, span.status)
        assert attrs(span).get("jeeves_router.cancelled") is True, name
        assert "error.type" not in attrs(span) and not span.events, name  # no exception recorded


async def test_a_failed_call_and_a_failed_stream_are_still_errors(spans: InMemorySpanExporter) -> None:  # noqa: F811
    async def refused(attempt: int) -> object:
        raise ConnectionError("refused")

    async def broken() -> AsyncIterator[ModelTextDelta]:
        yield ModelTextDelta("Refund ")
        raise ConnectionError("reset")

    with pytest.raises(ConnectionError):
        await traced_model_call("test:called", 1, refused)
    with pytest.raises(ConnectionError):
        async for _ in traced_model_stream("test:streamed", 1, broken()):
            pass
    for name in ("chat called", "chat streamed"):
        [span] = by_name(spans, name)
        assert span.status.status_code is StatusCode.ERROR and attrs(span)["error.type"] == "ConnectionError"
        assert "jeeves_router.cancelled" not in attrs(span)


async def test_a_stream_its_consumer_left_mid_answer_is_cut_short_one_left_after_it_is_not(
    spans: InMemorySpanExporter,  # noqa: F811
) -> None:
    async def stream() -> AsyncIterator[ModelStreamItem]:
        yield ModelTextDelta("Refund ")
        yield ModelTextDelta("issued.")
        yield ModelResponse((TextPart("Refund issued."),))

    async def leave(model: str, after: int) -> None:  # the consumer stops (break) after ``after`` items
        async with aclosing(traced_model_stream(model, 1, stream())) as items:
            seen = 0
            async for _ in items:
                seen += 1
                if seen == after:
                    break

    await leave("test:left", 1)  # mid-answer: the call was cut short
    await leave("test:read", 3)  # its response was read: a complete call, closed
    [left], [read] = by_name(spans, "chat left"), by_name(spans, "chat read")
    assert left.status.status_code is read.status.status_code is StatusCode.UNSET
    assert attrs(left).get("jeeves_router.cancelled") is True
    assert "jeeves_router.cancelled" not in attrs(read)
