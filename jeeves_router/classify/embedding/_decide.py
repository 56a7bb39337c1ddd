"""The embedded classifier's decision rule: from per-route probabilities to ranked results.

:class:`~jeeves_router.classify.embedding.EmbeddingClassifier` scores and calibrates; this
ranks each request's routes (by probability, then by the scorer's feature) and accepts the
best one when its probability reaches the threshold, else calls the request out of scope
(status ``missing_route``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..types import Classification, ClassifyResult

__all__ = ["classification", "ranked_results"]


def ranked_results(
    names: Sequence[str], features: Any, probs: Any, threshold: float | None, max_scores: int
) -> list[ClassifyResult]:
    """One result per row of ``probs`` [n, len(names)]: its best ``max_scores`` routes and the decision."""
    order = np.lexsort((-features, -probs))[:, :max_scores]  # each row on its own
    out = []
    for row, ps in zip(order.tolist(), probs[np.arange(len(order))[:, None], order].tolist(), strict=True):
        ranked = tuple((names[j], round(p, 6)) for j, p in zip(row, ps, strict=True))
        out.append(ClassifyResult(classification(ranked, threshold), stage="embedding", scores=ranked))
    return out


def classification(ranked: tuple[tuple[str, float], ...], threshold: float | None) -> Classification:
    """The best of ``ranked`` (route, probability) if it reaches ``threshold``, else out of scope."""
    top, conf = ranked[0]
    second = ranked[1] if len(ranked) > 1 else (None, None)
    raw = "embedding: " + ", ".join(f"{n} {p:.3f}" for n, p in ranked[:3])
    if threshold is not None and conf < threshold:
        reason = f"best route {top!r} has confidence {conf:.3f}, below the threshold {threshold:.3f}"
        return Classification(None, 0.0, "missing_route", raw, reason=reason)
    return Classification(top, conf, "ok", raw, runner_up=second[0], runner_up_confidence=second[1])
