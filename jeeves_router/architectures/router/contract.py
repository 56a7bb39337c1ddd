"""What the Router checks around any classifier: its answer's contract."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace

from ...classify.resolve import valid_confidence
from ...classify.types import Classification

__all__ = ["CLASSIFIER_USAGE_KEY", "within_contract"]

#: Key of the classifier's usage in ``RunResult.usage_by_route`` (not a valid route name).
CLASSIFIER_USAGE_KEY = "<classifier>"


def within_contract(c: Classification, allowed: Collection[str]) -> Classification:
    """``c``, or a failed classification when a classifier broke the contract.

    Any classifier may be plugged in (embedded, cascade, tool-call, custom), so its answer is
    checked before :func:`~jeeves_router.classify.resolve.resolve_route` decides, and every
    classifier's failure reads the same in ``router.classified``: a route outside the
    declared (and not excluded) set, or one that is not a ``str``, is ``unknown_route``; a
    confidence that is NaN, infinite or outside [0, 1] (or that the classifier itself found invalid) is
    ``invalid_confidence``, with no route and confidence 0 (the route asked for stays in
    ``requested``). ``resolve_route`` then sends either to the fallback.
    """
    route = c.route
    if route is not None and (not isinstance(route, str) or route not in allowed):
        # not a string (e.g. a list, which no set can even look up): a route no table declares
        requested = route if isinstance(route, str) else repr(route)
        return replace(c, route=None, confidence=0.0, status="unknown_route", requested=requested)
    if c.status == "invalid_confidence" or (c.ok and not valid_confidence(c.confidence)):
        if c.route is None and c.confidence == 0.0 and c.status == "invalid_confidence":
            return c
        return replace(c, route=None, confidence=0.0, status="invalid_confidence", requested=c.route or c.requested)
    return c
