"""Route tables of the Router (and its HandoffRouter preset): the route type and its checks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .._args import check_hook, check_text_and_examples, listed
from ..classify.cascade import CascadeClassifier
from ..classify.types import RouteSpec, check_classifier
from ..errors import UsageError
from ..ids import validate_route_names
from ..policies import RetryPolicy
from ..recovery.classify import ErrorHook
from ..runtime import Runtime

if TYPE_CHECKING:
    from ..actor import Actor

__all__ = [
    "RouterRoute",
    "check_route_table",
    "check_classifier_routes",
    "check_fallback",
    "check_unit_interval",
    "check_child_runtimes",
]


@dataclass(frozen=True)
class RouterRoute:
    """One route: a name, the agent that handles it, a description and example requests.

    ``classify_error`` (``(exc, context) -> ErrorClassification | None``) and
    ``retry_policy`` tune recovery of this route's specialist failures: a failure of
    ``agent`` itself, asked before that agent's own ``classify_error`` and the router agent's.
    A failure of an agent ``agent`` handed the turn to is judged by that agent's
    ``classify_error``, then the router agent's, under the ``Recovery``'s ``retry_policy``
    (a reclassification after it still leaves this route out).
    """

    name: str
    agent: Actor
    description: str = ""
    examples: Sequence[str] = field(default=())
    classify_error: ErrorHook | None = None
    retry_policy: RetryPolicy | None = None

    def __post_init__(self) -> None:
        check_text_and_examples(f"route {self.name!r}", self.description, self.examples)
        check_hook(self.classify_error, f"route {self.name!r}")

    @property
    def spec(self) -> RouteSpec:
        """What classifiers see of this route."""
        return RouteSpec(self.name, self.description, tuple(self.examples))


def check_route_table(routes: Sequence[RouterRoute], *, owner: str) -> tuple[RouterRoute, ...]:
    """Validate a route table; raise :class:`UsageError` naming the first problem.

    Checks: at least one route, RouterRoute objects, names in the safe pattern, no duplicate
    names (compared case-insensitively, with ``-``, ``_`` and spaces alike), Agent handlers.
    """
    table = tuple(listed(routes, what="routes", example="routes=[RouterRoute('billing', billing_agent, 'payments')]"))
    if not table:
        raise UsageError(f"{owner} needs at least one route: {owner}(routes=[RouterRoute('billing', billing_agent)])")
    for r in table:
        if not isinstance(r, RouterRoute):
            raise UsageError(f"routes must be RouterRoute objects, got {type(r).__name__}")
    validate_route_names([r.name for r in table], owner=owner)
    for r in table:
        if not hasattr(r.agent, "_events"):
            raise UsageError(f"route {r.name!r}: agent must be an Agent, got {type(r.agent).__name__}")
    return table


def check_classifier_routes(
    classifier: object,
    routes: Sequence[RouterRoute] | Sequence[RouteSpec],
    *,
    owner: str,
    exact: bool = False,
    protocol: bool = True,
) -> None:
    """Refuse a classifier with a fixed route table (``route_names``) that lacks some of the routes.

    An :class:`~jeeves_router.classify.embedding.EmbeddingClassifier` only scores the routes it
    was built on: a Router route it does not know would never be chosen, and its requests would
    go to a known route instead. A cascade's stages are checked too. A classifier without an
    ``async def classify`` is refused first (unless ``protocol`` is false).

    Args:
        classifier: The classifier (``None``: nothing to check).
        routes: The routes it is asked to choose among (``RouterRoute`` or ``RouteSpec``).
        owner: Who asks, for the message (``"Router"``, ``"evaluate"``).
        exact: Also refuse table routes that ``routes`` lacks (an evaluation scored on the shared
            routes only would measure another task than the one asked).
        protocol: Check the Classifier protocol first (``evaluate`` also takes a ``classify_batch`` alone).

    Raises:
        UsageError: Naming the routes the classifier lacks (and, with ``exact``, those ``routes`` lack).
    """
    if classifier is not None and protocol:
        check_classifier(classifier, "classifier")
    wanted = [r.name for r in routes]
    stages = [classifier]
    while stages:
        stage = stages.pop()
        if isinstance(stage, CascadeClassifier):
            stages += [stage.first, stage.second]
            continue
        known = getattr(stage, "route_names", None)
        if not isinstance(known, tuple) or not all(isinstance(n, str) for n in known):
            continue
        missing = [n for n in wanted if n not in known]
        extra = [n for n in known if n not in wanted] if exact else []
        if exact and (missing or extra):
            parts = [f"{', '.join(map(repr, missing))} missing from it (it could never choose them)"] if missing else []
            if extra:
                parts.append(f"{', '.join(map(repr, extra))} missing from the routes given (never offered to it)")
            raise UsageError(
                f"{owner}: its classifier {type(stage).__name__} knows the routes {', '.join(known)}, not the routes "
                f"given: {'; '.join(parts)}; pass the routes it was built on (e.g. routes=classifier.routes) or "
                "build or fit it on these routes"
            )
        if missing:
            raise UsageError(
                f"{owner}: its classifier {type(stage).__name__} knows the routes {', '.join(known)}, not "
                f"{', '.join(map(repr, missing))}, so it could never choose them; build or fit it on the router's "
                "routes (e.g. EmbeddingClassifier([r.spec for r in routes], ...))"
            )


def check_fallback(fallback_route: str | None, by_name: Mapping[str, RouterRoute]) -> None:
    """Raise :class:`UsageError` unless ``fallback_route`` is ``None`` or a declared route."""
    if fallback_route is not None and fallback_route not in by_name:
        raise UsageError(f"fallback_route {fallback_route!r} is not a route; routes: {', '.join(by_name)}")


def check_unit_interval(label: str, value: object) -> float:
    """Return ``value`` as a float if it is a number within [0, 1], else raise UsageError."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise UsageError(f"{label} must be within [0, 1], got {value!r}")
    return float(value)


def check_child_runtimes(agent: Actor, routes: Sequence[RouterRoute]) -> None:
    """Refuse a routed specialist that has a runtime of its own.

    A specialist runs as part of its router's run, through the router agent's runtime
    (one journal per run, one run id, one resume); a different ``runtime=`` on the
    specialist would never be used, so it is an error rather than silently ignored.
    """
    own = getattr(agent, "runtime", None)
    for r in routes:
        theirs = getattr(r.agent, "runtime", None)
        if theirs is not None and theirs is not own and type(theirs) is not Runtime:
            raise UsageError(
                f"route {r.name!r}: agent {r.agent.name!r} has its own runtime={theirs!r}, but routed specialists "
                f"run under the router agent's runtime; pass runtime=... to the router agent {agent.name!r} instead"
            )
