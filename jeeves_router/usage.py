"""Token and cost accounting."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Usage", "NO_USAGE"]


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens and cost of one or more model requests; ``+`` sums them.

    Attributes:
        input_tokens: Prompt tokens, cached ones included.
        output_tokens: Generated tokens.
        cached_input_tokens: The part of ``input_tokens`` served from a prompt cache.
        requests: How many model requests this covers.
        cost_usd: Cost in US dollars; ``None`` when any summed request had an unknown
            price (an unknown cost is never reported as 0).
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    requests: int = 0
    cost_usd: float | None = 0.0

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        if self is NO_USAGE or other is NO_USAGE:  # nothing to add: no new object
            return other if self is NO_USAGE else self
        cost = None if self.cost_usd is None or other.cost_usd is None else self.cost_usd + other.cost_usd
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cached_input_tokens + other.cached_input_tokens,
            self.requests + other.requests,
            cost,
        )

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens


#: Zero usage, shared (``Usage`` is immutable): a starting point that allocates nothing.
NO_USAGE = Usage()
