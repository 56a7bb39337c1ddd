"""From a classification to a decision: dispatch, fallback or unresolved (pure)."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from ..results import FallbackReason
from .types import Classification

__all__ = ["RouteDecision", "resolve_route"]

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


def resolve_route(
    c: Classification,
    *,
    threshold: float,
    fallback: str | None,
    routes: Collection[str],
    excluded: Collection[str] = (),
) -> RouteDecision:
    """Decide where a classified request goes.

    A declared, non-excluded route with status ``ok`` and confidence >= ``threshold`` is
    dispatched directly; anything else goes to ``fallback`` with the reason, or is
    unresolved when there is no fallback. Never returns a route outside ``routes``.
    """
    reason: FallbackReason | None
    if not c.ok or c.route is None:
        reason = _STATUS_REASON.get(c.status, "missing_route")
    elif c.route not in routes:
        reason = "unknown_route"
    elif c.route in excluded:
        reason = "excluded_route"
    elif not c.confidence >= threshold:
        reason = "low_confidence"
    else:
        return RouteDecision(c.route, False, None)
    if fallback is not None and fallback in routes and fallback not in excluded:
        return RouteDecision(fallback, True, reason)
    return RouteDecision(None, False, reason)
