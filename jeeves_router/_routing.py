"""What a root routing event says of its turn's route: :func:`routing_update`.

The one rule that the served stream's ``X-Jeeves-*`` headers, a journal's session turns and
a run's span follow to know how far a turn's routing got before its result exists.
:mod:`jeeves_router.events` exports both names.
"""

from __future__ import annotations

from typing import Any

from .events import Event, HandoffCompleted, RouterClassified, RouterDispatched, RouterFallback

__all__ = ["ROUTING_KINDS", "routing_update"]

#: The kinds of the events :func:`routing_update` reads (a filter for code that reads stored events).
ROUTING_KINDS = frozenset({"router.classified", "router.fallback", "router.dispatched", "handoff.completed"})


def routing_update(event: Event) -> dict[str, Any] | None:
    """What a root routing event says of its turn's route, as the run's result will say it.

    Fold these over a turn's root events (``dict.update``, latest last) to know how far its
    routing got before a result exists: a classification (a reclassification too) starts a
    new decision, with a confidence only from a usable answer and no fallback reason yet; a
    fallback names its route and reason; a dispatch its route; a handoff the agent it gave
    the turn to (as ``RunResult.route`` names the agent that answered, under the name its
    usage has in ``RunResult.usage_by_route``; none when the turn went back to the router
    itself). Used by the served stream's headers, a journal's
    session turns and a run's span, so all three tell one story.

    Returns:
        The fields the event sets (``route``, ``confidence``, ``fallback_reason``), or
        ``None`` for an event that says nothing of the route.
    """
    if isinstance(event, RouterClassified):
        confidence = event.confidence if event.status == "ok" else None
        return {"route": event.route, "confidence": confidence, "fallback_reason": None}
    if isinstance(event, RouterFallback):
        return {"route": event.fallback_route, "fallback_reason": event.reason}
    if isinstance(event, RouterDispatched):
        return {"route": event.route}
    if isinstance(event, HandoffCompleted):  # the agent that has the turn now, as the result will name it
        return {"route": None if event.path and event.to_agent == event.path[-1] else event.to_agent}
    return None
