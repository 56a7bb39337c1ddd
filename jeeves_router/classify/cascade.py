"""CascadeClassifier: a cheap first stage, a model second stage for the unsure requests.

The first stage (typically the offline :class:`~jeeves_router.classify.embedding.EmbeddingClassifier`)
answers on its own when it is confident. Otherwise the second stage (typically the LLM
classifier) is asked, with the first stage's best candidates as ``ClassifyRequest.hints``.
When the second stage cannot decide either, its non-ok classification is returned and the
Router applies its fallback.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import UsageError
from ..policies import check_count, check_number
from ..usage import NO_USAGE
from .resolve import valid_confidence
from .types import Classifier, ClassifyRequest, ClassifyResult, check_classifier, classify_result, with_spent_usage

__all__ = ["CascadeClassifier", "CascadeStats"]


@dataclass(frozen=True, slots=True)
class CascadeStats:
    """Running counts of a cascade's decisions.

    Attributes:
        first: Requests the first stage decided.
        second: Requests the second stage decided.
        undecided: Requests neither stage could decide.
        model_calls_saved: Second-stage calls avoided.
    """

    first: int = 0
    second: int = 0
    undecided: int = 0
    model_calls_saved: int = 0


class CascadeClassifier:
    """Two classifiers in sequence: the first when confident, else the second with hints.

    Args:
        first: The cheap classifier (its ``ClassifyResult.scores`` become the hints).
        second: The expensive classifier, called only for unsure requests.
        accept_above: The first stage's answer is used when it is ok, names one of the
            request's routes and its confidence is within [0, 1] and at least this. Usually
            at or above the first stage's own threshold.
        max_hints: How many of the first stage's ranked routes to pass on.
        first_stage_name: Label of the first stage in ``ClassifyResult.stage``
            (``"cascade:<name>"``).
        second_stage_name: Label of the second stage.

    Raises:
        UsageError: For an ``accept_above`` outside [0, 1], a ``max_hints`` that is no integer
            >= 0, empty stage names, or classifiers without ``async def classify``.
    """

    def __init__(
        self,
        first: Classifier,
        second: Classifier,
        *,
        accept_above: float = 0.8,
        max_hints: int = 3,
        first_stage_name: str = "embedding",
        second_stage_name: str = "llm",
    ) -> None:
        check_number("accept_above", accept_above, low=0, high=1)
        check_count("max_hints", max_hints, 0)
        for label, stage in (("first_stage_name", first_stage_name), ("second_stage_name", second_stage_name)):
            if not isinstance(stage, str) or not stage:
                raise UsageError(f"CascadeClassifier: {label} must be a non-empty string, got {stage!r}")
        for label, clf in (("first", first), ("second", second)):
            check_classifier(clf, f"the {label} stage")
        self.first = first
        self.second = second
        self.accept_above = accept_above
        self.max_hints = max_hints
        self._first_stage = f"cascade:{first_stage_name}"
        self._second_stage = f"cascade:{second_stage_name}"
        self._stats = CascadeStats()

    @property
    def stats(self) -> CascadeStats:
        """Counts since construction (or the last :meth:`reset_stats`)."""
        return self._stats

    def reset_stats(self) -> None:
        """Zero the counts."""
        self._stats = CascadeStats()

    def _hints(self, result: ClassifyResult, allowed: set[str]) -> tuple[str, ...]:
        names = [name for name, _ in result.scores]
        c = result.classification
        if not names and c.route:
            names = [c.route] + ([c.runner_up] if c.runner_up else [])
        seen: list[str] = []
        for name in names:
            if isinstance(name, str) and name not in seen and (not allowed or name in allowed):
                seen.append(name)
        return tuple(seen[: self.max_hints])

    async def classify(self, request: ClassifyRequest) -> ClassifyResult:
        """Classify with the first stage, and with the second only when the first is unsure."""
        first = classify_result(await self.first.classify(request), self.first)
        c = first.classification
        allowed = {r.name for r in request.routes}
        # an answer the Router would not dispatch (a route not offered, e.g. one excluded for a
        # reclassification, one that is not a string, or a confidence outside [0, 1]) is unsure:
        # the second stage decides
        usable = (
            c.ok and isinstance(c.route, str) and valid_confidence(c.confidence) and (not allowed or c.route in allowed)
        )
        if usable and c.confidence >= self.accept_above:
            saved = first.model_calls_saved + 1
            s = self._stats
            self._stats = replace(s, first=s.first + 1, model_calls_saved=s.model_calls_saved + 1)
            return replace(first, stage=self._first_stage, model_calls_saved=saved)
        hints = self._hints(first, allowed)
        try:
            second = classify_result(await self.second.classify(replace(request, hints=hints)), self.second)
        except Exception as exc:
            if first.usage != NO_USAGE:  # the first stage's model calls were paid for
                with_spent_usage(exc, first.usage)
            raise
        s = self._stats
        if second.classification.ok:
            self._stats = replace(s, second=s.second + 1)
        else:
            self._stats = replace(s, undecided=s.undecided + 1)
        return replace(
            second,
            stage=self._second_stage,
            usage=first.usage + second.usage,
            model_calls=first.model_calls + second.model_calls,
            model_calls_saved=first.model_calls_saved + second.model_calls_saved,
        )
