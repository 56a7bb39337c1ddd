"""Classification vocabulary shared by every classifier (LLM, embedded, cascade)."""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import field
from typing import Any, Literal, Protocol, runtime_checkable

from .._frozen import frozen
from ..messages import Message
from ..usage import NO_USAGE, Usage, with_spent_usage

__all__ = [
    "ParseStatus",
    "Classification",
    "RouteSpec",
    "ClassifyRequest",
    "ClassifyResult",
    "Classifier",
    "with_spent_usage",
    "check_classifier",
    "classify_result",
]

#: ``ok`` — a declared route and a valid confidence were found.
#: ``empty`` — the text was empty or blank.
#: ``missing_route`` — no route could be found (or the reply was too malformed to read).
#: ``unknown_route`` — a route was named but it is not declared (see ``requested``).
#: ``ambiguous_route`` — the reply named two different routes (two ``route:`` lines, two
#: JSON objects, a repeated JSON key or a list such as ``billing, technical``), in any
#: order. This is the "ambiguous" outcome: the Router never dispatches it and falls back
#: with the reason ``ambiguous_route``.
#: ``missing_confidence`` — a route was found but no confidence.
#: ``invalid_confidence`` — the confidence was not one number in [0, 1]: a word, a
#: fraction, a range, ``x out of y``, several numbers, NaN, infinite, negative or above 1.
ParseStatus = Literal[
    "ok",
    "empty",
    "missing_route",
    "unknown_route",
    "ambiguous_route",
    "missing_confidence",
    "invalid_confidence",
]


@frozen
class Classification:
    """A routing decision as read from a classifier.

    Attributes:
        route: The declared route name (canonical spelling) or ``None``.
        confidence: Within [0, 1] from the parser and the built-in classifiers; 0.0 when
            the status is not ``ok`` unless a policy supplied a value. Nothing stops a
            custom classifier from building one with NaN or 1.5:
            :func:`~jeeves_router.classify.resolve.resolve_route` treats any confidence
            that is not a finite number in [0, 1] as ``invalid_confidence``.
        status: See :data:`ParseStatus`.
        raw: The text the decision was read from (or a summary for non-text classifiers).
        reason: The classifier's stated reason when the status is ``ok``; for another
            status, what was wrong, e.g. ``"confidence '1/5' is a fraction, not one
            number"``.
        requested: The route text as written, when it did not match a declared route.
        runner_up: The second-best route, when the classifier ranks routes.
        runner_up_confidence: Its confidence.
    """

    route: str | None
    confidence: float
    status: ParseStatus
    raw: str
    reason: str | None = None
    requested: str | None = None
    runner_up: str | None = None
    runner_up_confidence: float | None = None

    @property
    def ok(self) -> bool:
        """True when a declared route and a valid confidence were found."""
        return self.status == "ok"

    @property
    def margin(self) -> float | None:
        """Confidence minus the runner-up's confidence, when both are known."""
        if self.runner_up_confidence is None or self.status != "ok":
            return None
        return self.confidence - self.runner_up_confidence


@frozen
class RouteSpec:
    """What a classifier knows of a route: its name, description and example requests."""

    name: str
    description: str = ""
    examples: tuple[str, ...] = ()

    def __hash__(self) -> int:
        # Equal specs have equal names; the name alone hashes without building a tuple
        # (route tables are hashed as cache keys on every classification).
        return hash(self.name)


@frozen
class ClassifyRequest:
    """One classification to make.

    Attributes:
        text: The request to classify.
        routes: The candidate routes (already without excluded ones).
        history: Earlier conversation turns the classifier may consider.
        context: Run context variables (read-only).
        feedback: Why a previous classification of this request failed (for
            reclassification); the classifier should include it in its prompt.
        hints: Candidate routes suggested by an earlier stage (cascade), best first.
    """

    text: str
    routes: tuple[RouteSpec, ...]
    history: tuple[Message, ...] = ()
    context: Mapping[str, Any] = field(default_factory=dict)
    feedback: str | None = None
    hints: tuple[str, ...] = ()


@frozen
class ClassifyResult:
    """What a classifier returns.

    Attributes:
        classification: The decision.
        usage: Model usage spent on it (zero for offline classifiers).
        stage: Which stage decided: ``"llm"``, ``"embedding"``, ``"static"``, ...
        model_calls: How many model requests were made.
        model_calls_saved: How many model requests an earlier stage made unnecessary.
        attempts: How many replies were read (1 + format retries).
        scores: Route scores, best first, when the classifier ranks routes.
    """

    classification: Classification
    usage: Usage = NO_USAGE
    stage: str = "llm"
    model_calls: int = 0
    model_calls_saved: int = 0
    attempts: int = 1
    scores: tuple[tuple[str, float], ...] = ()


@runtime_checkable
class Classifier(Protocol):
    """Anything that picks a route for a request.

    The Router only dispatches routes that are in ``request.routes``; a classifier that
    returns anything else is treated as ``unknown_route``.

    A classifier that fails after some of its model calls answered (e.g. a format retry
    whose transport failed) adds their usage to the exception's ``spent_usage`` (a
    :class:`~jeeves_router.usage.Usage`; a model adapter's failure carries the requests of
    the failed call already), and a Router with recovery counts it in the run's usage (see
    :func:`~jeeves_router.usage.with_spent_usage`).
    """

    async def classify(self, request: ClassifyRequest) -> ClassifyResult:
        """Classify ``request.text`` among ``request.routes``."""
        ...


def route_names(routes: Sequence[RouteSpec]) -> tuple[str, ...]:
    """The names of ``routes``, in order."""
    return tuple(r.name for r in routes)


def check_classifier(classifier: object, what: str) -> None:
    """Raise :class:`~jeeves_router.errors.UsageError` unless ``classifier`` has an ``async def classify``.

    ``what`` names the argument in the message (``"classifier"``, ``"the first stage"``).
    """
    from ..errors import UsageError

    method = getattr(classifier, "classify", None)
    if not isinstance(classifier, Classifier) or not callable(method):
        raise UsageError(f"{what} must have an async classify(request) method, got {type(classifier).__name__}")
    if not inspect.iscoroutinefunction(method):
        raise UsageError(
            f"{what} {type(classifier).__name__}.classify is not a coroutine function: "
            "declare it `async def classify(self, request)` returning a ClassifyResult"
        )


def classify_result(result: object, classifier: object) -> ClassifyResult:
    """``result`` if it is a :class:`ClassifyResult`, else a UsageError naming ``classifier`` and the fix."""
    if isinstance(result, ClassifyResult):
        return result
    from ..errors import UsageError

    got = type(result).__name__
    hint = "wrap it: ClassifyResult(classification)" if isinstance(result, Classification) else "return one"
    raise UsageError(
        f"{type(classifier).__name__}.classify returned {got}, not a ClassifyResult; {hint} "
        "(from jeeves_router.classify import ClassifyResult)"
    )
