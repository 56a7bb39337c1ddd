"""Retry policies, shared by the provider adapters and the recovery layer."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .errors import UsageError

if TYPE_CHECKING:
    import random

__all__ = ["RetryPolicy", "DEFAULT_RETRY", "FRAMEWORK_RETRY", "PROVIDER_RETRY"]


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
        if self.max_attempts < 1:
            raise UsageError(f"RetryPolicy.max_attempts must be >= 1, got {self.max_attempts}")
        if self.initial_delay_s < 0 or self.max_delay_s < 0:
            raise UsageError("RetryPolicy delays must be >= 0")
        if self.multiplier < 1:
            raise UsageError(f"RetryPolicy.multiplier must be >= 1, got {self.multiplier}")
        if not 0 <= self.jitter <= 1:
            raise UsageError(f"RetryPolicy.jitter must be within [0, 1], got {self.jitter}")

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
