"""The retry loop shared by the provider adapters.

One :class:`Retrier` wraps one adapter's calls. ``max_attempts`` counts every call, the
first included. Between attempts it waits with the policy's exponential backoff (jitter
drawn from an injectable :class:`random.Random`, so tests can seed it) or the provider's
``Retry-After``, capped by ``max_delay_s``. Waiting goes through ``anyio.sleep`` by
default, so a cancelled run stops waiting at once; tests pass their own ``sleep`` to
record the delays without waiting.

Streams are retried only while nothing has reached the consumer: once an item was
yielded, a failure raises :class:`~jeeves_router.errors.StreamInterrupted` instead of
starting over, so the consumer never sees text twice. Every attempt's stream is closed,
also when the consumer stops early.
"""

from __future__ import annotations

import random
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from typing import TypeVar

import anyio

from .._log import get_logger
from ..errors import ModelError, StreamInterrupted
from ..policies import RetryPolicy
from ..tracing import traced_model_call, traced_model_stream

__all__ = ["Retrier", "Sleep", "ErrorMapper"]

T = TypeVar("T")
Sleep = Callable[[float], Awaitable[None]]
ErrorMapper = Callable[[BaseException], "ModelError | None"]

_log = get_logger(__name__)
# Closing an abandoned HTTP stream must finish even inside a cancelled scope, but never hang.
_CLOSE_TIMEOUT_S = 5.0


class Retrier:
    """Runs provider calls under a :class:`RetryPolicy`.

    Args:
        policy: Attempts and delays.
        model_name: The model's printable name, for logs and errors.
        map_error: Turns an exception into a :class:`ModelError`, or ``None`` for
            exceptions that are not provider failures (those propagate unchanged).
        sleep: The wait function; ``anyio.sleep`` unless a test injects a recorder.
        rng: The jitter source; pass ``random.Random(seed)`` for repeatable delays.
    """

    def __init__(
        self,
        policy: RetryPolicy,
        *,
        model_name: str,
        map_error: ErrorMapper,
        sleep: Sleep | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.policy = policy
        self.model_name = model_name
        self._map_error = map_error
        self._sleep: Sleep = sleep or anyio.sleep
        self._rng = rng or random.Random()

    def _classify(self, exc: BaseException, attempt: int) -> ModelError | None:
        err = self._map_error(exc)
        if err is not None:
            err.attempt = attempt
            err.metadata.setdefault("model", self.model_name)
            err.metadata["attempts"] = attempt
        return err

    async def _backoff_or_raise(self, err: ModelError, exc: BaseException, attempt: int) -> None:
        """Wait before the next attempt, or raise ``err`` when no attempt is left."""
        if err.severity != "retriable" or attempt >= self.policy.max_attempts:
            _log.warning(
                "model.call_failed",
                model=self.model_name,
                attempt=attempt,
                severity=err.severity,
                status_code=err.status_code,
                kind=err.metadata.get("kind"),
                error=str(err),
            )
            # The adapter owns the retries of a model call: an error it gave up on is final.
            err.retries_exhausted = err.severity == "retriable"
            if err is exc:
                raise err
            raise err from exc
        delay = self.policy.delay_s(attempt, retry_after_s=err.retry_after_s, rng=self._rng)
        _log.info(
            "model.retry",
            model=self.model_name,
            attempt=attempt,
            next_attempt=attempt + 1,
            delay_s=round(delay, 4),
            status_code=err.status_code,
            kind=err.metadata.get("kind"),
            retry_after_s=err.retry_after_s,
        )
        await self._sleep(delay)

    async def call(self, op: Callable[[int], Awaitable[T]]) -> T:
        """Await ``op(attempt)`` until it succeeds, fails for good, or attempts run out.

        Raises:
            ModelError: the last failure, with ``attempt`` set and the provider's
                exception as ``__cause__``.
        """
        attempt = 0
        while True:
            attempt += 1
            try:
                return await traced_model_call(self.model_name, attempt, op, self._map_error)  # type: ignore[no-any-return]
            except Exception as exc:
                err = self._classify(exc, attempt)
                if err is None:
                    raise
                await self._backoff_or_raise(err, exc, attempt)

    async def stream(self, open_stream: Callable[[int], AsyncIterator[T]]) -> AsyncGenerator[T, None]:
        """Yield the items of ``open_stream(attempt)``, retrying only before the first item.

        Raises:
            ModelError: a failure before anything was yielded, once retries are spent
                or when it is not retriable.
            StreamInterrupted: a failure after something was yielded.
        """
        attempt = 0
        while True:
            attempt += 1
            inner = traced_model_stream(self.model_name, attempt, open_stream(attempt), self._map_error)
            yielded = False
            failure: tuple[ModelError, Exception] | None = None
            try:
                while True:
                    try:
                        item = await inner.__anext__()
                    except StopAsyncIteration:
                        return
                    except Exception as exc:
                        err = self._classify(exc, attempt)
                        if err is None:
                            raise
                        if yielded:
                            raise self._interrupted(err) from exc
                        failure = (err, exc)
                        break
                    yield item
                    yielded = True
            finally:
                await _close(inner)
            assert failure is not None  # the loop above only falls through after a failure
            await self._backoff_or_raise(failure[0], failure[1], attempt)

    def _interrupted(self, err: ModelError) -> StreamInterrupted:
        _log.warning(
            "model.stream_interrupted",
            model=self.model_name,
            attempt=err.attempt,
            status_code=err.status_code,
            kind=err.metadata.get("kind"),
            error=str(err),
        )
        metadata = dict(err.metadata)
        metadata["underlying_severity"] = err.severity
        return StreamInterrupted(
            f"{self.model_name}: the stream broke after text reached the consumer; not retried, "
            f"so no text is repeated ({err})",
            status_code=err.status_code,
            provider=err.provider,
            attempt=err.attempt,
            metadata=metadata,
        )


async def _close(stream: AsyncIterator[T]) -> None:
    aclose = getattr(stream, "aclose", None)
    if aclose is None:
        return
    with anyio.move_on_after(_CLOSE_TIMEOUT_S, shield=True):
        await aclose()
