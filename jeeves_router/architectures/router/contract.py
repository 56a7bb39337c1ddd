"""What the Router checks around any classifier: its answer's contract."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace

from ...classify.types import Classification

__all__ = ["CLASSIFIER_USAGE_KEY", "within_contract"]

#: Key of the classifier's usage in ``RunResult.usage_by_route`` (not a valid route name).
CLASSIFIER_USAGE_KEY = "<classifier>"


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
