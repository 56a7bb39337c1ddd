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

Every request sent counts once in ``Usage.requests``, failed ones included, as a provider's
dashboard and rate limits count them: the response of a retried call carries the usage of
the attempts that failed before it, and a call that fails for good (or a stream broken
after its text went out) carries the usage of all its attempts as the error's
``spent_usage`` (:func:`~jeeves_router.usage.with_spent_usage`), which the run counts. A
failed attempt's usage is what the adapter marked on it (the tokens a broken stream had
reported, with no cost unless the provider had reported its final usage), else one
request: with no cost when the provider answered with an error status (not billed), with
an unknown cost (``None``) when no answer came (a timeout, a dropped connection: the
provider may have billed it). A connection that never opened sent nothing and counts none.
A call that a cancellation cuts off (a run's time limit) raises no error of its own: it
reports what it spent to the scope that cut it (:func:`~jeeves_router.usage.spent_when_cut`),
the request it was waiting on included, with an unknown cost. So does a stream its consumer
closes mid-answer (``break`` out of a run's stream): the request was sent and partly answered.
"""

from __future__ import annotations

import random
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import replace
from typing import TypeVar

import anyio

from .._log import get_logger
from ..errors import ModelError, StreamInterrupted
from ..policies import RetryPolicy
from ..tracing import traced_model_call, traced_model_stream
from ..usage import NO_USAGE, Usage, spent_usage, spent_when_cut, with_spent_usage
from ._errors import never_sent

__all__ = ["Retrier", "Sleep", "ErrorMapper"]

T = TypeVar("T")
U = TypeVar("U")
Sleep = Callable[[float], Awaitable[None]]
ErrorMapper = Callable[[BaseException], "ModelError | None"]

_log = get_logger(__name__)
# Closing an abandoned HTTP stream must finish even inside a cancelled scope, but never hang.
_CLOSE_TIMEOUT_S = 5.0
_ERROR_ANSWER = Usage(requests=1)  # the provider answered with an error status: not billed
_NO_ANSWER = Usage(requests=1, cost_usd=None)  # sent, no answer: what it cost is unknown


def attempt_usage(exc: BaseException, err: ModelError | None) -> Usage:
    """What one failed attempt spent (see the module docstring)."""
    marked = spent_usage(exc)
    if marked is not None:  # the adapter's own account of the attempt (a broken stream's tokens)
        return marked
    if never_sent(exc):
        return NO_USAGE
    return _ERROR_ANSWER if err is not None and err.status_code else _NO_ANSWER


def _with_spent(response: U, spent: Usage) -> U:
    """``response`` (a ModelResponse) with the usage of the attempts that failed before it added."""
    if spent is NO_USAGE or not hasattr(response, "usage"):  # a text delta
        return response
    return replace(response, usage=spent + response.usage)  # type: ignore[type-var]


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

    async def _backoff_or_raise(self, err: ModelError, exc: BaseException, attempt: int, spent: Usage) -> None:
        """Wait before the next attempt, or raise ``err`` when no attempt is left.

        A wait cut off by a cancellation reports ``spent``, the failed attempts' usage (see
        :func:`~jeeves_router.usage.spent_when_cut`).
        """
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
        try:
            await self._sleep(delay)
        except anyio.get_cancelled_exc_class():
            spent_when_cut(spent)
            raise

    async def call(self, op: Callable[[int], Awaitable[T]]) -> T:
        """Await ``op(attempt)`` until it succeeds, fails for good, or attempts run out.

        Raises:
            ModelError: the last failure, with ``attempt`` set and the provider's
                exception as ``__cause__``.
        """
        attempt = 0
        spent = NO_USAGE  # what the failed attempts so far spent
        while True:
            attempt += 1
            try:
                response = await traced_model_call(self.model_name, attempt, op, self._map_error)
            except Exception as exc:
                err = self._classify(exc, attempt)
                if err is None:  # no provider failure (nothing sent): the failed attempts' usage goes with it
                    _spending(exc, spent)
                    raise
                spent = spent + attempt_usage(exc, err)
                with_spent_usage(err, spent, replace=True)
                await self._backoff_or_raise(err, exc, attempt, spent)
                continue
            except anyio.get_cancelled_exc_class():  # cut off waiting for the answer: the request was sent
                spent_when_cut(spent + _NO_ANSWER)
                raise
            return _with_spent(response, spent)  # type: ignore[no-any-return]

    async def stream(self, open_stream: Callable[[int], AsyncIterator[T]]) -> AsyncGenerator[T, None]:
        """Yield the items of ``open_stream(attempt)``, retrying only before the first item.

        Raises:
            ModelError: a failure before anything was yielded, once retries are spent
                or when it is not retriable.
            StreamInterrupted: a failure after something was yielded.
        """
        attempt = 0
        spent = NO_USAGE  # what the failed attempts so far spent
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
                    except anyio.get_cancelled_exc_class():  # cut off waiting for the answer: it was sent
                        spent_when_cut(spent + _NO_ANSWER)
                        raise
                    except Exception as exc:
                        err = self._classify(exc, attempt)
                        if err is None:  # no provider failure: the failed attempts' usage goes with it
                            _spending(exc, spent)
                            raise
                        spent = spent + attempt_usage(exc, err)
                        if yielded:
                            raise with_spent_usage(self._interrupted(err), spent) from exc
                        with_spent_usage(err, spent, replace=True)
                        failure = (err, exc)
                        break
                    try:
                        yield item if spent is NO_USAGE else _with_spent(item, spent)
                    except GeneratorExit:  # the consumer left mid-answer: the request was sent
                        if not hasattr(item, "usage"):  # a text delta: its response (and usage) never came
                            spent_when_cut(spent + _NO_ANSWER)
                        raise
                    yielded = True
            finally:
                await _close(inner)
            assert failure is not None  # the loop above only falls through after a failure
            await self._backoff_or_raise(failure[0], failure[1], attempt, spent)

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


def _spending(exc: Exception, spent: Usage) -> None:
    """Mark ``exc`` with ``spent`` unless nothing was spent."""
    if spent is not NO_USAGE:
        with_spent_usage(exc, spent)


async def _close(stream: AsyncIterator[T]) -> None:
    aclose = getattr(stream, "aclose", None)
    if aclose is None:
        return
    with anyio.move_on_after(_CLOSE_TIMEOUT_S, shield=True):
        await aclose()
