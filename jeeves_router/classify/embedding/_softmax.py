"""Multinomial logistic regression in plain numpy: training by full-batch Adam, and softmax.

The linear layer of the ``logreg`` and ``late`` scorers (:mod:`.scorers`, :mod:`.late`), with
no scikit-learn at run time. :mod:`.scorers` exports both names.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from .arrays import Array

__all__ = ["softmax_rows", "train_softmax"]


def softmax_rows(scores: Array) -> Array:
    """Each row of ``scores`` turned into probabilities (softmax, stable)."""
    z = scores - scores.max(axis=1, keepdims=True)
    p = np.exp(z)
    out: Array = (p / p.sum(axis=1, keepdims=True)).astype(np.float32)
    return out


def train_softmax(
    vectors: Array,
    labels: NDArray[np.int64],
    n_classes: int,
    *,
    c: float = 10.0,
    balanced: bool = False,
    iterations: int = 300,
    learning_rate: float = 0.05,
) -> tuple[Array, Array]:
    """Multinomial logistic regression by full-batch Adam: weights [d, n_classes] and bias.

    ``c`` is the inverse L2 strength (scikit-learn's ``C``); ``balanced`` weights examples
    inversely to their class's frequency.
    """
    x = vectors.astype(np.float64)
    n, d = x.shape
    onehot = np.eye(n_classes)[labels]
    counts = np.maximum(np.bincount(labels, minlength=n_classes).astype(np.float64), 1.0)
    sample_w = (n / (n_classes * counts))[labels] if balanced else np.ones(n)
    sample_w = sample_w / sample_w.sum()
    lam = 1.0 / (c * n)
    w: NDArray[np.float64] = np.zeros((d, n_classes))  # typed by dtype only: the loop below takes both
    b: NDArray[np.float64] = np.zeros(n_classes)
    mw, vw, mb, vb = np.zeros_like(w), np.zeros_like(w), np.zeros_like(b), np.zeros_like(b)
    for t in range(1, iterations + 1):
        z = x @ w + b
        z -= z.max(axis=1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(axis=1, keepdims=True)
        g = (p - onehot) * sample_w[:, None]
        gw, gb = x.T @ g + lam * w, g.sum(axis=0)
        for grad, m, v, param in ((gw, mw, vw, w), (gb, mb, vb, b)):
            m *= 0.9
            m += 0.1 * grad
            v *= 0.999
            v += 0.001 * grad * grad
            param -= learning_rate * (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8)
    return w.astype(np.float32), b.astype(np.float32)
