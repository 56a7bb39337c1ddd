"""The test kit's classifier: :class:`StaticClassifier`, a table of substrings to routes.

Part of :mod:`jeeves_router.testing`, which exports it; library code never imports either.
"""

from __future__ import annotations

from collections.abc import Mapping

from .classify.parser import normalize_route_name
from .classify.types import Classification, ClassifyRequest, ClassifyResult
from .errors import UsageError

__all__ = ["StaticClassifier"]


class StaticClassifier:
    """A classifier that answers from a table (text substring -> route) or always one route.

    Args:
        route: The route to answer when no rule matches (``None``: ``missing_route``).
        confidence: The confidence to report, as given: a value that is not a number in [0, 1]
            (NaN, 2, ``"0.9"``) stands in for a misbehaving classifier, which the Router
            refuses as ``invalid_confidence``.
        rules: ``{substring: route}``; the first substring found in the text wins.

    Raises:
        UsageError: For a route that is not a string or ``None``, or rules that are not a
            mapping of strings to route names.
    """

    def __init__(
        self, route: str | None = None, confidence: float = 1.0, *, rules: Mapping[str, str] | None = None
    ) -> None:
        if route is not None and not isinstance(route, str):
            raise UsageError(f"StaticClassifier: route must be a route name (a string) or None, got {route!r}")
        if rules is not None and not (
            isinstance(rules, Mapping) and all(isinstance(k, str) and isinstance(v, str) for k, v in rules.items())
        ):
            raise UsageError(
                f"StaticClassifier: rules must map substrings to route names ({{'refund': 'billing'}}), got {rules!r}"
            )
        self.route = route
        self.confidence = confidence
        self.rules = dict(rules or {})
        self.requests: list[ClassifyRequest] = []

    async def classify(self, request: ClassifyRequest) -> ClassifyResult:
        """Answer from the table."""
        self.requests.append(request)
        route = self.route
        low = request.text.lower()
        for needle, r in self.rules.items():
            if needle.lower() in low:
                route = r
                break
        names = {normalize_route_name(s.name): s.name for s in request.routes}
        if route is None:
            c = Classification(None, 0.0, "missing_route", "static")
        elif normalize_route_name(route) in names:
            c = Classification(names[normalize_route_name(route)], self.confidence, "ok", f"static:{route}")
        else:
            c = Classification(None, 0.0, "unknown_route", f"static:{route}", requested=route)
        return ClassifyResult(c, stage="static")
