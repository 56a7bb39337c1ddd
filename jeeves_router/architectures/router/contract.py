"""What the Router checks around any classifier: its answer's contract, and every attempt's usage."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import replace

from ...classify.types import Classification
from ...results import RunResult
from ...usage import Usage

__all__ = ["within_contract", "with_failed_usage"]


def with_failed_usage(result: RunResult, failed: Mapping[str, Usage]) -> RunResult:
    """``result`` with the usage of failed attempts added to ``usage`` and ``usage_by_route``."""
    by_route = dict(result.usage_by_route)
    total = result.usage
    for name, u in failed.items():
        by_route[name] = by_route.get(name, Usage()) + u
        total = total + u
    return replace(result, usage=total, usage_by_route=by_route)


def within_contract(c: Classification, allowed: Collection[str]) -> Classification:
    """``c``, or a failed classification when a classifier named a route outside ``allowed``.

    Any classifier may be plugged in (embedded, cascade, tool-call, custom), so its answer is
    checked before :func:`~jeeves_router.classify.resolve.resolve_route` decides: a route
    outside the declared (and not excluded) set is ``unknown_route``. Confidences are
    validated by ``resolve_route`` itself (NaN, infinite or outside [0, 1]:
    ``invalid_confidence``, the fallback), whichever path the classification took.
    """
    if c.route is not None and c.route not in allowed:
        return replace(c, route=None, confidence=0.0, status="unknown_route", requested=c.route)
    return c
