"""Token prices per model, used to fill :attr:`jeeves_router.usage.Usage.cost_usd`.

Prices are US dollars per million tokens, copied by hand from the providers' public
pricing pages (OpenAI "API pricing", Anthropic "Pricing"; standard tier, no batch
discount). They change: check them before relying on a cost figure, and override them
for your account with :func:`set_price` or an adapter's ``price=`` argument.

Keys are ``"<provider>:<model>"``. A dated snapshot (``gpt-4.1-mini-2025-04-14``,
``claude-haiku-4-5-20251001``) or a ``-latest`` alias falls back to its undated name. A
model that is not in the table has no price: its cost is ``None``, never ``0``.

Example::

    from jeeves_router.models.prices import Price, set_price

    set_price("openai:my-finetune", Price(input=0.30, output=1.20, cached_input=0.15))
    set_price("openai:llama3.1:8b", Price(input=0, output=0))   # a local server: free
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from ..errors import UsageError

__all__ = ["Price", "PRICES", "set_price", "price_for", "cost_usd"]


@dataclass(frozen=True, slots=True)
class Price:
    """The price of one model in US dollars per million tokens.

    Attributes:
        input: Uncached prompt tokens.
        output: Generated tokens.
        cached_input: Prompt tokens read from the provider's prompt cache; ``None``
            bills them as ``input``.
        cache_write: Prompt tokens written to the cache (Anthropic); ``None`` bills
            them as ``input``.
    """

    input: float
    output: float
    cached_input: float | None = None
    cache_write: float | None = None

    def __post_init__(self) -> None:
        for name in ("input", "output", "cached_input", "cache_write"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise UsageError(f"Price.{name} must be >= 0 dollars per million tokens, got {value}")


def _anthropic(input_: float, output: float) -> Price:
    # Anthropic bills 5-minute cache writes at 1.25x and cache reads at 0.1x the input price.
    return Price(input=input_, output=output, cached_input=round(input_ * 0.1, 6), cache_write=round(input_ * 1.25, 6))


_DEFAULT_PRICES: dict[str, Price] = {
    "openai:gpt-4.1": Price(input=2.00, output=8.00, cached_input=0.50),
    "openai:gpt-4.1-mini": Price(input=0.40, output=1.60, cached_input=0.10),
    "openai:gpt-4.1-nano": Price(input=0.10, output=0.40, cached_input=0.025),
    "openai:gpt-4o": Price(input=2.50, output=10.00, cached_input=1.25),
    "openai:gpt-4o-mini": Price(input=0.15, output=0.60, cached_input=0.075),
    "openai:gpt-5": Price(input=1.25, output=10.00, cached_input=0.125),
    "openai:gpt-5-mini": Price(input=0.25, output=2.00, cached_input=0.025),
    "openai:gpt-5-nano": Price(input=0.05, output=0.40, cached_input=0.005),
    "openai:o4-mini": Price(input=1.10, output=4.40, cached_input=0.275),
    "openai:o3": Price(input=2.00, output=8.00, cached_input=0.50),
    "anthropic:claude-haiku-4-5": _anthropic(1.00, 5.00),
    "anthropic:claude-sonnet-4-5": _anthropic(3.00, 15.00),
    "anthropic:claude-sonnet-4": _anthropic(3.00, 15.00),
    "anthropic:claude-opus-4-5": _anthropic(5.00, 25.00),
    "anthropic:claude-opus-4-1": _anthropic(15.00, 75.00),
    "anthropic:claude-opus-4": _anthropic(15.00, 75.00),
    "anthropic:claude-3-7-sonnet": _anthropic(3.00, 15.00),
    "anthropic:claude-3-5-haiku": _anthropic(0.80, 4.00),
}

#: The live table (defaults plus :func:`set_price` overrides). Read it; change it through
#: :func:`set_price`.
PRICES: Mapping[str, Price] = _DEFAULT_PRICES

_SNAPSHOT_SUFFIX = re.compile(r"(-\d{4}-\d{2}-\d{2}|-\d{8}|-latest)$")


def set_price(model: str, price: Price | None) -> None:
    """Set (or with ``None`` remove) the price of ``model``, a ``"provider:model"`` string.

    Raises:
        UsageError: if ``model`` has no ``provider:`` prefix.
    """
    prefix, sep, name = model.partition(":")
    if not sep or not prefix or not name:
        raise UsageError(f"price key {model!r} must look like 'openai:gpt-4.1-mini'")
    if price is None:
        _DEFAULT_PRICES.pop(model, None)
    else:
        _DEFAULT_PRICES[model] = price


def price_for(model: str, overrides: Mapping[str, Price] | None = None) -> Price | None:
    """The price of ``model`` (``"provider:model"``), or ``None`` when unknown.

    ``overrides`` is searched before the table; dated snapshots fall back to their
    undated name.
    """
    tables = (overrides or {}, _DEFAULT_PRICES)
    candidates = [model]
    stripped = _SNAPSHOT_SUFFIX.sub("", model)
    if stripped != model:
        candidates.append(stripped)
    for key in candidates:
        for table in tables:
            if key in table:
                return table[key]
    return None


def cost_usd(
    price: Price | None,
    *,
    input_tokens: int,
    output_tokens: int,
    cached_input_tokens: int = 0,
    cache_write_tokens: int = 0,
) -> float | None:
    """The cost in US dollars of one request, or ``None`` when ``price`` is ``None``.

    Args:
        price: The model's price.
        input_tokens: All prompt tokens, cached and cache-written ones included.
        output_tokens: Generated tokens.
        cached_input_tokens: Prompt tokens read from the cache.
        cache_write_tokens: Prompt tokens written to the cache.
    """
    if price is None:
        return None
    plain = max(input_tokens - cached_input_tokens - cache_write_tokens, 0)
    cached_rate = price.input if price.cached_input is None else price.cached_input
    write_rate = price.input if price.cache_write is None else price.cache_write
    total = (
        plain * price.input
        + cached_input_tokens * cached_rate
        + cache_write_tokens * write_rate
        + output_tokens * price.output
    )
    return total / 1_000_000
