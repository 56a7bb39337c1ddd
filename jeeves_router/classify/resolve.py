"""From a classification to a decision: dispatch, fallback or unresolved (pure).

:func:`resolve_route` is the decision boundary every router goes through, whatever
classifier produced the :class:`Classification` (the parser, a classify tool call, the
embedded classifier, a cascade or a custom classifier). It validates the classification
there, once, the same way for all of them.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Collection
from dataclasses import dataclass
from functools import lru_cache

from ..results import FallbackReason
from .types import Classification

__all__ = ["RouteDecision", "resolve_route", "valid_confidence"]

_STATUS_REASON: dict[str, FallbackReason] = {
    "empty": "empty_reply",
    "missing_route": "missing_route",
    "unknown_route": "unknown_route",
    "ambiguous_route": "ambiguous_route",
    "missing_confidence": "missing_confidence",
    "invalid_confidence": "invalid_confidence",
}


@dataclass(frozen=True, slots=True)
class RouteDecision:
    """The router's decision.

    Attributes:
        route: The route to dispatch to, or ``None`` for unresolved.
        used_fallback: True when ``route`` is the fallback, not the classified route.
        reason: Why the classified route was not used (``None`` for a direct dispatch).
    """

    route: str | None
    used_fallback: bool
    reason: FallbackReason | None

    @property
    def unresolved(self) -> bool:
        """True when no route can be dispatched."""
        return self.route is None


@lru_cache(maxsize=256)
def _direct(route: str) -> RouteDecision:
    """The decision to dispatch to ``route`` (immutable, so one per route is shared)."""
    return RouteDecision(route, False, None)


def valid_confidence(confidence: object) -> bool:
    """True for a real number (not a bool) that is finite and within [0, 1]."""
    if type(confidence) is float:  # the usual case: NaN and infinities fail the comparison
        return 0.0 <= confidence <= 1.0
    if isinstance(confidence, bool) or not isinstance(confidence, numbers.Real):
        return False
    x = float(confidence)
    return math.isfinite(x) and 0.0 <= x <= 1.0


def resolve_route(
    c: Classification,
    *,
    threshold: float,
    fallback: str | None,
    routes: Collection[str],
    excluded: Collection[str] = (),
) -> RouteDecision:
    """Decide where a classified request goes.

    A declared, non-excluded route with status ``ok`` and a valid confidence >=
    ``threshold`` is dispatched directly; anything else goes to ``fallback`` with the
    reason, or is unresolved when there is no fallback. Never returns a route outside
    ``routes``.

    Validation, in this order: a non-``ok`` status gives its own reason (``ambiguous_route``
    for two routes in one reply, ...); a route that is not a string is ``unknown_route``; a
    confidence that is not a real number, or is NaN, infinite or outside [0, 1], is
    ``invalid_confidence`` — whichever classifier produced it (a :class:`Classification`
    can be built with any value).

    Example:
        >>> from jeeves_router.classify import Classification, resolve_route
        >>> c = Classification("billing", float("nan"), "ok", "custom")
        >>> resolve_route(c, threshold=0.5, fallback="general", routes=["billing", "general"])
        RouteDecision(route='general', used_fallback=True, reason='invalid_confidence')
    """
    reason: FallbackReason | None
    route, confidence = c.route, c.confidence
    if c.status != "ok" or route is None:
        reason = _STATUS_REASON.get(c.status, "missing_route")
    elif not isinstance(route, str):
        reason = "unknown_route"
    elif not (0.0 <= confidence <= 1.0 if type(confidence) is float else valid_confidence(confidence)):
        reason = "invalid_confidence"
    elif route not in routes:
        reason = "unknown_route"
    elif route in excluded:
        reason = "excluded_route"
    elif not confidence >= threshold:
        reason = "low_confidence"
    elif type(route) is str:
        return _direct(route)
    else:
        return RouteDecision(route, False, None)
    if fallback is not None and fallback in routes and fallback not in excluded:
        return RouteDecision(fallback, True, reason)
    return RouteDecision(None, False, reason)
