"""The shared retry loop, error mapping helpers and price table, without any network."""

from __future__ import annotations

import email.utils
import logging
import random
from collections.abc import AsyncGenerator, AsyncIterator

import anyio
import pytest

from jeeves_router.errors import ModelError, StreamInterrupted, UsageError
from jeeves_router.models import prices
from jeeves_router.models._errors import map_sdk_error, parse_retry_after, redact
from jeeves_router.models._retry import Retrier
from jeeves_router.policies import RetryPolicy

POLICY = RetryPolicy(max_attempts=4, initial_delay_s=0.5, multiplier=2.0, max_delay_s=3.0, jitter=0.0)


class SleepRecorder:
    """Records the delays asked for instead of waiting."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


class ProviderFailure(Exception):
    """Stands in for an SDK exception; mapped through :func:`mapper`."""

    def __init__(self, severity: str, retry_after_s: float | None = None) -> None:
        super().__init__(f"failure ({severity})")
        self.severity = severity
        self.retry_after_s = retry_after_s


def mapper(exc: BaseException) -> ModelError | None:
    if isinstance(exc, ProviderFailure):
        return ModelError(str(exc), severity=exc.severity, retry_after_s=exc.retry_after_s, provider="fake")
    return None


def make_retrier(policy: RetryPolicy = POLICY, **kwargs: object) -> tuple[Retrier, SleepRecorder]:
    sleep = SleepRecorder()
    return Retrier(policy, model_name="fake:m", map_error=mapper, sleep=sleep, **kwargs), sleep  # type: ignore[arg-type]


@pytest.mark.anyio
async def test_call_retries_retriable_failures_with_exponential_backoff() -> None:
    retrier, sleep = make_retrier()
    attempts: list[int] = []

    async def op(attempt: int) -> str:
        attempts.append(attempt)
        if attempt < 3:
            raise ProviderFailure("retriable")
        return "ok"

    assert await retrier.call(op) == "ok"
    assert attempts == [1, 2, 3]
    assert sleep.delays == [0.5, 1.0]


@pytest.mark.anyio
async def test_max_attempts_counts_every_call_and_keeps_the_cause() -> None:
    retrier, sleep = make_retrier()
    calls = 0
    failures: list[ProviderFailure] = []

    async def op(attempt: int) -> str:
        nonlocal calls
        calls += 1
        failures.append(ProviderFailure("retriable"))
        raise failures[-1]

    with pytest.raises(ModelError) as info:
        await retrier.call(op)
    assert calls == POLICY.max_attempts == 4
    assert sleep.delays == [0.5, 1.0, 2.0]
    assert info.value.severity == "retriable"
    assert info.value.attempt == 4
    assert info.value.__cause__ is failures[-1]


@pytest.mark.anyio
async def test_critical_failure_is_not_retried() -> None:
    retrier, sleep = make_retrier()
    calls = 0

    async def op(attempt: int) -> str:
        nonlocal calls
        calls += 1
        raise ProviderFailure("critical")

    with pytest.raises(ModelError) as info:
        await retrier.call(op)
    assert (calls, sleep.delays, info.value.severity) == (1, [], "critical")


@pytest.mark.anyio
async def test_retry_after_replaces_backoff_and_is_capped() -> None:
    retrier, sleep = make_retrier()
    hints = iter([2.5, 120.0, None])

    async def op(attempt: int) -> str:
        hint = next(hints)
        if attempt < 3:
            raise ProviderFailure("retriable", retry_after_s=hint)
        return "ok"

    await retrier.call(op)
    assert sleep.delays == [2.5, POLICY.max_delay_s]


@pytest.mark.anyio
async def test_seeded_jitter_is_repeatable_and_within_bounds() -> None:
    policy = RetryPolicy(max_attempts=5, initial_delay_s=1.0, multiplier=2.0, max_delay_s=30.0, jitter=0.5)

    async def run(seed: int) -> list[float]:
        retrier, sleep = make_retrier(policy, rng=random.Random(seed))

        async def op(attempt: int) -> str:
            raise ProviderFailure("retriable")

        with pytest.raises(ModelError):
            await retrier.call(op)
        return sleep.delays

    first, again, other = await run(7), await run(7), await run(8)
    assert first == again
    assert first != other
    for delay, base in zip(first, [1.0, 2.0, 4.0, 8.0], strict=True):
        assert base * 0.5 <= delay <= base


@pytest.mark.anyio
async def test_exceptions_that_are_not_provider_failures_propagate_unchanged() -> None:
    retrier, sleep = make_retrier()
    calls = 0

    async def op(attempt: int) -> str:
        nonlocal calls
        calls += 1
        raise KeyError("bug in the adapter")

    with pytest.raises(KeyError):
        await retrier.call(op)
    assert (calls, sleep.delays) == (1, [])


@pytest.mark.anyio
async def test_default_sleep_is_cancellable() -> None:
    slow = RetryPolicy(max_attempts=3, initial_delay_s=3600.0, multiplier=1.0, max_delay_s=3600.0)
    retrier = Retrier(slow, model_name="fake:m", map_error=mapper)
    calls = 0

    async def op(attempt: int) -> str:
        nonlocal calls
        calls += 1
        raise ProviderFailure("retriable")

    with anyio.move_on_after(0.05) as scope:
        await retrier.call(op)
    assert scope.cancelled_caught
    assert calls == 1


class ScriptedStreams:
    """Each attempt streams the given items, then raises the given failure (if any)."""

    def __init__(self, *plans: tuple[list[str], Exception | None]) -> None:
        self.plans = list(plans)
        self.opened = 0
        self.closed = 0

    def open(self, attempt: int) -> AsyncIterator[str]:
        items, failure = self.plans[attempt - 1]
        self.opened += 1
        return self._gen(items, failure)

    async def _gen(self, items: list[str], failure: Exception | None) -> AsyncGenerator[str, None]:
        try:
            for item in items:
                yield item
            if failure is not None:
                raise failure
        finally:
            self.closed += 1


async def collect(stream: AsyncIterator[str], into: list[str]) -> None:
    async for item in stream:
        into.append(item)


@pytest.mark.anyio
async def test_stream_is_retried_while_nothing_was_yielded() -> None:
    retrier, sleep = make_retrier()
    streams = ScriptedStreams(([], ProviderFailure("retriable")), (["a", "b"], None))
    seen: list[str] = []
    await collect(retrier.stream(streams.open), seen)
    assert seen == ["a", "b"]
    assert (streams.opened, streams.closed, sleep.delays) == (2, 2, [0.5])


@pytest.mark.anyio
async def test_stream_failing_after_an_item_raises_stream_interrupted_without_retry() -> None:
    retrier, sleep = make_retrier()
    failure = ProviderFailure("retriable")
    streams = ScriptedStreams((["a", "b"], failure), (["a", "b", "c"], None))
    seen: list[str] = []
    with pytest.raises(StreamInterrupted) as info:
        await collect(retrier.stream(streams.open), seen)
    assert seen == ["a", "b"]  # nothing repeated, nothing from a second attempt
    assert (streams.opened, streams.closed, sleep.delays) == (1, 1, [])
    assert info.value.__cause__ is failure
    assert info.value.metadata["underlying_severity"] == "retriable"


@pytest.mark.anyio
async def test_abandoned_stream_is_closed() -> None:
    retrier, _ = make_retrier()
    streams = ScriptedStreams((["a", "b", "c"], None))
    stream = retrier.stream(streams.open)
    assert await stream.__anext__() == "a"
    await stream.aclose()
    assert streams.closed == 1


@pytest.mark.anyio
async def test_retries_and_failures_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    retrier, _ = make_retrier(RetryPolicy(max_attempts=2, initial_delay_s=0.1, multiplier=1.0, jitter=0.0))

    async def op(attempt: int) -> str:
        raise ProviderFailure("retriable")

    with caplog.at_level(logging.DEBUG, logger="jeeves_router"), pytest.raises(ModelError):
        await retrier.call(op)
    events = [(r.event, r.fields["attempt"]) for r in caplog.records]  # type: ignore[attr-defined]
    assert events == [("model.retry", 1), ("model.call_failed", 2)]


def test_parse_retry_after_forms() -> None:
    assert parse_retry_after({"Retry-After": "3"}) == 3.0
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    when = email.utils.formatdate(1_000_030, usegmt=True)
    assert parse_retry_after({"retry-after": when}, now=1_000_000) == pytest.approx(30.0)
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


def test_redact_masks_given_secrets_and_key_shaped_strings() -> None:
    text = "bad key sk-proj-abcdefghijklmnop and token hunter2-secret, Authorization: Bearer xyz123"
    out = redact(text, ["hunter2-secret"])
    assert "abcdefghijklmnop" not in out
    assert "hunter2-secret" not in out
    assert "xyz123" not in out


def test_unknown_exceptions_are_not_mapped() -> None:
    assert map_sdk_error(RuntimeError("x"), provider="openai") is None
    own = ModelError("already mapped", severity="critical")
    assert map_sdk_error(own, provider="openai") is own


def test_unknown_model_cost_is_none_not_zero() -> None:
    assert prices.price_for("openai:no-such-model") is None
    assert prices.cost_usd(None, input_tokens=10, output_tokens=10) is None


def test_snapshot_names_fall_back_and_overrides_win() -> None:
    base = prices.price_for("openai:gpt-4.1-mini")
    assert base is not None
    assert prices.price_for("openai:gpt-4.1-mini-2025-04-14") == base
    assert prices.price_for("anthropic:claude-haiku-4-5-20251001") == prices.price_for("anthropic:claude-haiku-4-5")
    mine = prices.Price(input=9.0, output=9.0)
    assert prices.price_for("openai:gpt-4.1-mini", {"openai:gpt-4.1-mini": mine}) == mine
    try:
        prices.set_price("openai:my-finetune", mine)
        assert prices.price_for("openai:my-finetune") == mine
    finally:
        prices.set_price("openai:my-finetune", None)
    assert prices.price_for("openai:my-finetune") is None


def test_cost_bills_cache_reads_and_writes_at_their_rates() -> None:
    price = prices.Price(input=1.0, output=5.0, cached_input=0.1, cache_write=1.25)
    cost = prices.cost_usd(
        price, input_tokens=1_000_000, output_tokens=1_000_000, cached_input_tokens=400_000, cache_write_tokens=100_000
    )
    assert cost == pytest.approx(0.5 * 1.0 + 0.4 * 0.1 + 0.1 * 1.25 + 5.0)
    with pytest.raises(UsageError):
        prices.Price(input=-1.0, output=1.0)
    with pytest.raises(UsageError):
        prices.set_price("gpt-4.1", price)
