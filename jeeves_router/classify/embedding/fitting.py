"""What :meth:`EmbeddingClassifier.fit` does with the scored validation rows.

Calibrate the top route's decision feature, refuse fits that cannot reject anything, and
choose the threshold: by the balanced/precision objective of :func:`choose_threshold`, or
with a certified cap on the misroute rate (:func:`~jeeves_router.classify.risk.choose_risk_threshold`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ...errors import UsageError
from ..risk import RiskChoice, choose_risk_threshold
from .calibration import Calibrator, ThresholdChoice, choose_threshold, make_calibrator

__all__ = ["FitReport", "fit_threshold", "check_held_out"]


@dataclass(frozen=True, slots=True)
class FitReport:
    """What :meth:`EmbeddingClassifier.fit` chose.

    Attributes:
        calibration: ``"platt"`` or ``"isotonic"``.
        threshold: The chosen confidence threshold and its validation figures (see
            :class:`ThresholdChoice`; its ``oos_recall`` is ``None`` without out-of-scope rows).
        rows: Validation rows used.
        oos_rows: How many of them were out of scope.
        closed_accuracy: In-scope rows whose top route was right, before any threshold.
        risk: With ``max_misroute``: the certified cut and its figures.
    """

    calibration: str
    threshold: ThresholdChoice
    rows: int
    oos_rows: int
    closed_accuracy: float
    risk: RiskChoice | None = None

    @property
    def oos_tuned(self) -> bool:
        """Whether out-of-scope rows took part in choosing the threshold."""
        return self.oos_rows > 0


def _key(text: str) -> str:
    return " ".join(text.casefold().split())


def check_held_out(texts: Sequence[str], known: Iterable[str]) -> None:
    """Refuse validation rows that are mostly the classifier's own examples.

    A classifier scores its own examples as near-certain hits, so calibrating on them teaches
    it that every answer is right and the fitted threshold rejects nothing.
    """
    own = {_key(t) for t in known}
    hits = sum(_key(t) in own for t in texts)
    if hits and hits * 2 >= len(texts):
        raise UsageError(
            f"fit: {hits} of {len(texts)} validation rows are the routes' own examples or descriptions; a "
            "classifier scores those as certain, so the fit would never reject anything. Fit on held-out "
            "labelled requests (not the route file's examples), including some out-of-scope ones"
        )


def fit_threshold(
    features: NDArray[Any],
    truth: NDArray[np.int64],
    *,
    calibration: str,
    objective: str,
    target_precision: float,
    max_misroute: float | None,
    risk_confidence: float,
    oos_share: float | None = None,
) -> tuple[Calibrator, FitReport]:
    """Calibrate on the rows' decision features [n, routes] and choose the threshold.

    Args:
        features: Per-row, per-route decision features (see :mod:`.scorers`).
        truth: Each row's route index, or -1 for out-of-scope rows.
        calibration: ``"platt"`` or ``"isotonic"``.
        objective: ``"balanced"`` or ``"precision"`` (ignored with ``max_misroute``).
        target_precision: For ``objective="precision"``.
        max_misroute: Cap on the misroute rate of accepted requests, or ``None``.
        risk_confidence: Probability with which that cap holds.
        oos_share: Certify the cap for traffic with up to this out-of-scope share, bounding
            in-scope and out-of-scope rows separately (``None``: the validation mix).

    Returns:
        The fitted calibrator and the report (whose ``threshold.threshold`` is the threshold).

    Raises:
        UsageError: When the fit is degenerate (constant confidence) or the cap cannot be certified.
    """
    if max_misroute is not None and calibration != "platt":
        raise UsageError(
            f"max_misroute needs the 'platt' calibration, not {calibration!r} (a strictly increasing map keeps the "
            "certified cut)",
            argument="max_misroute",
        )
    top = features.argmax(axis=1)
    top_feature = features[np.arange(len(top)), top]
    correct = top == truth
    in_scope = truth >= 0
    calibrator = make_calibrator(calibration)
    calibrator.fit(top_feature, correct)
    confidence = calibrator.predict(top_feature)
    if float(confidence.max() - confidence.min()) < 1e-6:
        wrong = int((~correct).sum())
        raise UsageError(
            f"fit: the calibrated confidence is {float(confidence[0]):.3f} for every validation row ({wrong} of "
            f"{len(top)} rows wrong), so its threshold could never tell a right route from a wrong one. Fit on "
            "held-out labelled requests that include out-of-scope ones (label 'oos') and some the routes get wrong"
        )
    probs = calibrator.predict(features)
    choice = choose_threshold(probs.max(axis=1), correct, in_scope, objective=objective,  # type: ignore[arg-type]
                              target_precision=target_precision)  # fmt: skip
    risk = None
    if max_misroute is not None:
        risk = choose_risk_threshold(
            top_feature.tolist(), correct.tolist(), max_misroute=max_misroute, confidence=risk_confidence,
            in_scope=in_scope.tolist(), oos_share=oos_share,
        )  # fmt: skip
        if not risk.certified:
            raise UsageError(
                f"fit: no threshold keeps misroutes at or below {max_misroute:g} with confidence "
                f"{risk_confidence:g} on these {len(top)} rows; allow more misroutes, add labelled rows, or use a "
                "more accurate scorer (e.g. late with out-of-scope negatives)"
            )
        threshold = float(calibrator.predict(np.asarray([risk.cut]))[0])
        accepted = probs.max(axis=1) >= threshold
        n_in, n_oos = max(int(in_scope.sum()), 1), int((~in_scope).sum())
        choice = ThresholdChoice(
            threshold,
            float((accepted & correct & in_scope).sum() / n_in),
            float((~accepted & ~in_scope).sum() / n_oos) if n_oos else None,
            float((accepted & correct).sum() / max(int(accepted.sum()), 1)),
            "max_misroute",
        )
    closed = float(correct[in_scope].mean()) if in_scope.any() else 0.0
    report = FitReport(calibration, choice, len(top), int((~in_scope).sum()), closed, risk)
    return calibrator, report
