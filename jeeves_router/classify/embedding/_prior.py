"""The short-query prior of the ``late`` scorer: how much a query's own similarities count.

A one-word query's MaxSim (and lexical cosine) is a single noisy draw, not the evidence of ten
words that all find a counterpart in one example. A query of ``n`` tokens keeps the share
``n / (n + prior_tokens)`` of each similarity; the rest is what unrelated texts score, measured
at fit time as the mean similarity between examples of different routes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from .arrays import Array
from .lexical import LexicalIndex

if TYPE_CHECKING:
    from .token_bank import TokenBank

__all__ = ["PRIOR_TOKENS", "shrink_weights", "unrelated_similarities"]

PRIOR_TOKENS = 2.0
_SAMPLE = 64  # examples whose similarity to every example of the other routes is averaged


def shrink_weights(lengths: Sequence[int] | NDArray[np.int64], prior_tokens: float) -> Array:
    """The weight ``n / (n + prior_tokens)`` a query of ``n`` tokens gives its own similarities.

    The rest goes to the similarity of unrelated texts; with ``prior_tokens`` 0 the weight is 1.

    Args:
        lengths: Each query's token count.
        prior_tokens: How many tokens of evidence the prior is worth (>= 0).

    Returns:
        One weight in [0, 1] per query.
    """
    n = np.asarray(lengths, dtype=np.float64)
    if not prior_tokens:
        return np.ones(len(n), dtype=np.float32)
    out: Array = (n / (n + prior_tokens)).astype(np.float32)
    return out


def unrelated_similarities(
    bank: TokenBank,
    routes: NDArray[np.int64],
    lexical: LexicalIndex | None,
    texts: Sequence[str] | None,
) -> tuple[float, float]:
    """Mean MaxSim and mean lexical cosine between examples of different routes.

    Each of a seeded sample of examples (at most 64) is scored against every example of the
    other routes, the way a query is (query-side MaxSim over the sampled example's tokens).

    Args:
        bank: The examples' token vectors, as the scorer holds them.
        routes: Each example's route.
        lexical: The scorer's lexical index (None: no lexical term, its mean is 0).
        texts: The examples' texts, in the bank's order (needed with ``lexical``).

    Returns:
        ``(unrelated, unrelated_lexical)``; both 0 with fewer than two routes.
    """
    if len(np.unique(routes)) < 2:
        return 0.0, 0.0
    sample = np.sort(np.random.default_rng(0).permutation(len(routes))[:_SAMPLE])
    other = routes[sample][:, None] != routes[None, :]  # [sample, examples]
    lengths = bank.lengths[sample]
    rows = np.concatenate([np.arange(bank.starts[i], bank.starts[i] + bank.lengths[i]) for i in sample])
    best = np.maximum.reduceat(bank.matrix[rows] @ bank.matrix.T, bank.starts, axis=1)  # [tokens, examples]
    per_pair = np.add.reduceat(best, np.concatenate([[0], np.cumsum(lengths)[:-1]]), axis=0) / lengths[:, None]
    unrelated = float(per_pair[other].mean())
    if lexical is None or texts is None:
        return unrelated, 0.0
    return unrelated, float(lexical.similarity([texts[int(i)] for i in sample])[other].mean())
