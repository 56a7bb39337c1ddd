"""Retry policies, shared by the provider adapters and the recovery layer."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .errors import UsageError, argument_named

if TYPE_CHECKING:
    import random

__all__ = ["RetryPolicy", "DEFAULT_RETRY", "FRAMEWORK_RETRY", "PROVIDER_RETRY", "check_count", "check_number"]


def check_count(name: str, value: object, minimum: int) -> None:
    """Refuse ``value`` unless it is an integer (not a bool) of at least ``minimum``.

    Raises:
        UsageError: naming ``name`` and the value given (``'3'``, ``2.5``, ``-1``).
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise UsageError(f"{name} must be an integer >= {minimum}, got {value!r}", argument=argument_named(name))


def check_number(name: str, value: object, *, low: float, high: float = math.inf, open_low: bool = False) -> None:
    """Refuse ``value`` unless it is a real number (not a bool, not NaN) within its bounds.

    Args:
        name: What the value is, for the message.
        value: The value given.
        low: The lowest value allowed (excluded with ``open_low``).
        high: The highest value allowed.
        open_low: Whether ``low`` itself is refused.

    Raises:
        UsageError: naming ``name``, the bounds and the value given (``'10'``, ``nan``).
    """
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if number and (low < value if open_low else low <= value) and value <= high:  # type: ignore[operator]
        return
    bounds = f"> {low:g}" if open_low else f">= {low:g}"
    if high != math.inf:
        bounds = f"within {'(' if open_low else '['}{low:g}, {high:g}]"
    raise UsageError(f"{name} must be a number {bounds}, got {value!r}", argument=argument_named(name))


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how patiently a failing step is tried again.

    Attributes:
        max_attempts: All calls, the first included (1 means no retry).
        initial_delay_s: Delay before the second attempt.
        multiplier: Factor applied to the delay after each further attempt.
        max_delay_s: Cap on any single delay, a provider's ``Retry-After`` included.
        jitter: Fraction of random spread, in [0, 1]: a delay ``d`` becomes a value in
            ``[d * (1 - jitter), d]``.
    """

    max_attempts: int = 3
    initial_delay_s: float = 0.5
    multiplier: float = 1.5
    max_delay_s: float = 30.0
    jitter: float = 0.0

    def __post_init__(self) -> None:
        check_count("RetryPolicy.max_attempts", self.max_attempts, 1)
        check_number("RetryPolicy.initial_delay_s", self.initial_delay_s, low=0)
        check_number("RetryPolicy.max_delay_s", self.max_delay_s, low=0)
        check_number("RetryPolicy.multiplier", self.multiplier, low=1)
        check_number("RetryPolicy.jitter", self.jitter, low=0, high=1)

    def delay_s(self, attempt: int, *, retry_after_s: float | None = None, rng: random.Random | None = None) -> float:
        """The delay to wait after failed attempt number ``attempt`` (1-based).

        A provider's ``retry_after_s`` replaces the computed backoff, still capped by
        ``max_delay_s``; jitter applies only to computed backoff.
        """
        if retry_after_s is not None and retry_after_s >= 0:
            return min(retry_after_s, self.max_delay_s)
        base = min(self.initial_delay_s * self.multiplier ** max(attempt - 1, 0), self.max_delay_s)
        if self.jitter:
            if rng is None:
                import random  # only retries with jitter need it: not imported with the package

            r = (rng or random).random()
            base = base * (1 - self.jitter * r)
        return base


#: Capabilities and routes: 3 attempts, 0.5 s, x1.5.
DEFAULT_RETRY = RetryPolicy()
#: The framework's own steps (classification, planning): 2 attempts, 0.2 s, x1.0.
FRAMEWORK_RETRY = RetryPolicy(max_attempts=2, initial_delay_s=0.2, multiplier=1.0)
#: Provider adapters: 3 attempts, 0.5 s, x2, with jitter.
PROVIDER_RETRY = RetryPolicy(max_attempts=3, initial_delay_s=0.5, multiplier=2.0, max_delay_s=20.0, jitter=0.25)
