"""Calibration: raw decision features to probabilities, and the threshold that rejects.

A calibrator maps a feature (see :mod:`.scorers`) to the probability that the route it
belongs to is the right answer, learned on labelled validation rows where out-of-scope rows
count as wrong answers. :func:`choose_threshold` then picks the confidence below which the
classifier says "none of my routes".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from ...errors import UsageError

__all__ = [
    "Calibrator",
    "PlattCalibrator",
    "IsotonicCalibrator",
    "make_calibrator",
    "calibrator_from_dict",
    "ThresholdChoice",
    "choose_threshold",
]

FloatArray = NDArray[np.float64]


class Calibrator:
    """Base class: ``fit(features, correct)`` then ``predict(features)`` in [0, 1], non-decreasing."""

    kind: str = ""

    def fit(self, features: NDArray[Any], correct: NDArray[Any]) -> None:
        """Learn P(correct | feature) from 1-D ``features`` and boolean ``correct``."""
        raise NotImplementedError

    def predict(self, features: NDArray[Any]) -> NDArray[np.float32]:
        """Probabilities for ``features`` (any shape)."""
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe parameters."""
        raise NotImplementedError

    @staticmethod
    def _inputs(features: NDArray[Any], correct: NDArray[Any]) -> tuple[FloatArray, FloatArray]:
        f = np.asarray(features, dtype=np.float64).ravel()
        y = np.asarray(correct, dtype=np.float64).ravel()
        if len(f) != len(y) or len(f) < 2:
            raise UsageError("calibration needs at least two (feature, correct) pairs of equal length")
        if not np.all(np.isfinite(f)):
            raise UsageError("calibration features must be finite")
        return f, y


class PlattCalibrator(Calibrator):
    """Logistic (Platt) scaling ``sigmoid(a * feature + b)`` with ``a >= 0``.

    Fitted by Newton's method on the log-loss, with Platt's smoothed targets so a perfectly
    separable validation set does not push the slope to infinity.
    """

    kind = "platt"

    def __init__(self, a: float = 1.0, b: float = 0.0) -> None:
        self.a, self.b = a, b

    def fit(self, features: NDArray[Any], correct: NDArray[Any]) -> None:
        """See :meth:`Calibrator.fit`."""
        f, y = self._inputs(features, correct)
        n_pos, n_neg = y.sum(), len(y) - y.sum()
        t = np.where(y > 0, (n_pos + 1) / (n_pos + 2), 1 / (n_neg + 2))
        mu, sd = f.mean(), f.std() or 1.0
        z = (f - mu) / sd
        a, b = 1.0, 0.0
        ridge = 1e-3  # keeps the slope finite when the data carry no signal
        for _ in range(100):
            p = 1 / (1 + np.exp(np.clip(-(a * z + b), -50, 50)))
            g = np.array([((p - t) * z).sum() + ridge * a, (p - t).sum()])
            w = p * (1 - p) + 1e-12
            h = np.array([[(w * z * z).sum() + ridge, (w * z).sum()], [(w * z).sum(), w.sum()]]) + 1e-9 * np.eye(2)
            step = np.linalg.solve(h, g)
            scale = min(1.0, 5.0 / max(float(np.abs(step).max()), 1e-12))  # damped Newton
            a, b = a - scale * step[0], b - scale * step[1]
            if np.abs(step).max() < 1e-10:
                break
        a = max(a, 0.0)  # more similar must never mean less likely
        self.a, self.b = float(a / sd), float(b - a * mu / sd)

    def predict(self, features: NDArray[Any]) -> NDArray[np.float32]:
        """See :meth:`Calibrator.predict`."""
        z = np.clip(self.a * np.asarray(features, dtype=np.float64) + self.b, -50, 50)
        return (1 / (1 + np.exp(-z))).astype(np.float32)

    def to_dict(self) -> dict[str, Any]:
        """See :meth:`Calibrator.to_dict`."""
        return {"kind": self.kind, "a": self.a, "b": self.b}


class IsotonicCalibrator(Calibrator):
    """Isotonic regression (pool adjacent violators), interpolated linearly between blocks."""

    kind = "isotonic"

    def __init__(self, xs: list[float] | None = None, ys: list[float] | None = None) -> None:
        self.xs: list[float] = list(xs or [0.0, 1.0])
        self.ys: list[float] = list(ys or [0.0, 1.0])

    def fit(self, features: NDArray[Any], correct: NDArray[Any]) -> None:
        """See :meth:`Calibrator.fit`."""
        f, y = self._inputs(features, correct)
        order = np.argsort(f, kind="stable")
        f, y = f[order], y[order]
        # Blocks: [sum of y, count, mean of x]; merge while a block's mean exceeds the next's.
        sums: list[float] = []
        counts: list[float] = []
        xsum: list[float] = []
        for fi, yi in zip(f, y, strict=True):
            sums.append(float(yi))
            counts.append(1.0)
            xsum.append(float(fi))
            while len(sums) > 1 and sums[-2] / counts[-2] >= sums[-1] / counts[-1]:
                s, c, x = sums.pop(), counts.pop(), xsum.pop()
                sums[-1] += s
                counts[-1] += c
                xsum[-1] += x
        self.xs = [x / c for x, c in zip(xsum, counts, strict=True)]
        self.ys = [s / c for s, c in zip(sums, counts, strict=True)]

    def predict(self, features: NDArray[Any]) -> NDArray[np.float32]:
        """See :meth:`Calibrator.predict`."""
        x = np.asarray(features, dtype=np.float64)
        return np.interp(x, self.xs, self.ys).astype(np.float32)

    def to_dict(self) -> dict[str, Any]:
        """See :meth:`Calibrator.to_dict`."""
        return {"kind": self.kind, "xs": self.xs, "ys": self.ys}


def make_calibrator(kind: Literal["platt", "isotonic"] | str) -> Calibrator:
    """A new, unfitted calibrator by name."""
    if kind == "platt":
        return PlattCalibrator()
    if kind == "isotonic":
        return IsotonicCalibrator()
    raise UsageError(f"unknown calibration {kind!r}; choose 'platt' or 'isotonic'")


def calibrator_from_dict(d: Mapping[str, Any]) -> Calibrator:
    """Rebuild a calibrator from :meth:`Calibrator.to_dict` output."""
    try:
        if d["kind"] == "platt":
            return PlattCalibrator(float(d["a"]), float(d["b"]))
        if d["kind"] == "isotonic":
            return IsotonicCalibrator([float(x) for x in d["xs"]], [float(y) for y in d["ys"]])
    except (KeyError, TypeError, ValueError) as exc:
        raise UsageError(f"malformed calibration in classifier file: {exc}") from exc
    raise UsageError(f"unknown calibration kind {d.get('kind')!r} in classifier file")


@dataclass(frozen=True, slots=True)
class ThresholdChoice:
    """The chosen threshold and what it achieves on the data it was chosen on.

    Attributes:
        threshold: Accept a route when its confidence is >= this.
        in_scope_accuracy: In-scope rows routed to the right route and accepted.
        oos_recall: Out-of-scope rows rejected; ``None`` when there were none, in which case
            the threshold was not tuned to reject out-of-scope requests.
        precision: Accepted rows that were routed right.
        objective: The rule used, ``"balanced"`` or ``"precision"``.
    """

    threshold: float
    in_scope_accuracy: float
    oos_recall: float | None
    precision: float
    objective: str


def choose_threshold(
    confidence: NDArray[Any],
    correct: NDArray[Any],
    in_scope: NDArray[Any],
    *,
    objective: Literal["balanced", "precision"] = "balanced",
    target_precision: float = 0.9,
) -> ThresholdChoice:
    """Pick the acceptance threshold on validation rows.

    ``balanced`` maximises (in-scope accuracy + out-of-scope recall) / 2; ``precision``
    takes the lowest threshold whose accepted rows are right at least ``target_precision``
    of the time. The threshold falls halfway between two neighbouring distinct confidences.

    Args:
        confidence: The top route's confidence per row.
        correct: Whether the top route was the right one (always False for out-of-scope rows).
        in_scope: Whether the row has a real route.
        objective: See above.
        target_precision: For ``objective="precision"``.

    Returns:
        The threshold and its validation figures.
    """
    conf = np.asarray(confidence, dtype=np.float64).ravel()
    ok = np.asarray(correct, dtype=bool).ravel()
    ins = np.asarray(in_scope, dtype=bool).ravel()
    if not len(conf) == len(ok) == len(ins) or len(conf) == 0:
        raise UsageError("choose_threshold: confidence, correct and in_scope must be non-empty and equal length")
    if objective not in ("balanced", "precision"):
        raise UsageError(f"unknown objective {objective!r}; choose 'balanced' or 'precision'")
    if not 0.0 < target_precision <= 1.0:
        raise UsageError(f"target_precision must be within (0, 1], got {target_precision!r}")
    order = np.argsort(-conf, kind="stable")
    c, good, oos = conf[order], (ok & ins)[order], (~ins)[order]
    n_in, n_oos = max(int(ins.sum()), 1), int((~ins).sum())
    accepted_good = np.concatenate([[0], np.cumsum(good)])
    accepted_oos = np.concatenate([[0], np.cumsum(oos)])
    accepted = np.arange(len(c) + 1)
    in_acc = accepted_good / n_in
    oos_rec = (n_oos - accepted_oos) / n_oos if n_oos else np.ones(len(c) + 1)
    precision = np.divide(accepted_good, accepted, out=np.ones(len(c) + 1), where=accepted > 0)
    # A cut after position j accepts rows [0, j); only cuts between distinct values are real.
    real = np.concatenate([[True], c[1:] != c[:-1], [True]])
    if objective == "balanced":
        score = np.where(real, (in_acc + oos_rec) / 2, -np.inf)
        j = int(np.argmax(score))
    else:
        meets = real & (precision >= target_precision)
        j = int(np.max(np.nonzero(meets)[0])) if meets.any() else 0
    if j == 0:
        threshold = float(min(1.0, c[0] + 1e-6))
    elif j == len(c):
        threshold = float(max(0.0, c[-1] - 1e-6))
    else:
        threshold = float((c[j - 1] + c[j]) / 2)
    recall = float(oos_rec[j]) if n_oos else None
    return ThresholdChoice(threshold, float(in_acc[j]), recall, float(precision[j]), objective)
