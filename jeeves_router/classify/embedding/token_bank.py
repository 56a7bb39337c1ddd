"""The examples' token vectors, and query-side MaxSim for one query or many at once.

MaxSim of a query to an example: each query token's best cosine among the example's token
vectors, averaged over the query's tokens (ColBERT's late interaction, query side).

:meth:`TokenBank.maxsim_batch` gives each query of a batch the numbers it gets alone, to the
last bit: the index arithmetic is done for the whole batch, but each query's matrix product
and the reductions after it are the calls a query alone makes, on the same operands. One
product stacked over many queries would be faster, but nothing promises it the same rounding:
BLAS picks its kernels by shape (with OpenBLAS here, a one-token query's matrix-vector product
differs in the last bit from its row of a stacked product), and numpy sums a block's columns
in order over the tokens but a one-example block pairwise.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from .arrays import Array
from .encoders import l2_normalise

__all__ = ["TokenBank", "by_token_count", "project"]


def by_token_count(tokens: Sequence[Array]) -> list[tuple[NDArray[np.int64], Array]]:
    """The texts grouped by token count (none: left out): their indexes and their tokens [texts, count, dim].

    A product of such a stack is one BLAS call per text, the same call as for that text alone.
    """
    if len(tokens) == 1:  # one text: its own C-ordered array, as np.stack would give it
        return [(np.zeros(1, dtype=np.int64), np.ascontiguousarray(tokens[0])[None])] if len(tokens[0]) else []
    groups: dict[int, list[int]] = {}
    for i, t in enumerate(tokens):
        if len(t):
            groups.setdefault(len(t), []).append(i)
    return [(np.array(idx, dtype=np.int64), np.stack([tokens[i] for i in idx])) for idx in groups.values()]


def project(groups: list[tuple[NDArray[np.int64], Array]], projection: Array | None, n: int) -> list[Array]:
    """The ``n`` texts' token vectors (as :func:`by_token_count` groups them) projected and re-normalised.

    ``projection`` None: the vectors as they are. A text without token vectors gets an empty array.
    """
    out: list[Array] = [np.zeros((0, 0), np.float32)] * n
    for idx, block in groups:
        projected = block if projection is None else l2_normalise(np.matmul(block, projection))
        for i, tokens in zip(idx.tolist(), projected, strict=True):
            out[i] = tokens
    return out


class TokenBank:
    """Token vectors of many examples, stacked, with each example's first row and row count."""

    def __init__(self, tokens: Sequence[Array]) -> None:
        lengths = [len(t) for t in tokens]
        self.starts: NDArray[np.int64] = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        self.lengths: NDArray[np.int64] = np.asarray(lengths, dtype=np.int64)
        self.matrix: Array = (
            np.ascontiguousarray(np.vstack(tokens), dtype=np.float32) if tokens else np.zeros((0, 0), np.float32)
        )

    def maxsim(self, query: Array, examples: NDArray[np.int64]) -> Array:
        """Mean over ``query`` tokens of the best cosine in each of ``examples`` [len(examples)]."""
        if len(examples) == 0 or len(query) == 0:
            return np.zeros(len(examples), dtype=np.float32)
        return self.maxsim_batch([query], np.asarray(examples), np.array([len(examples)]))

    def maxsim_batch(self, queries: Sequence[Array], candidates: NDArray[np.int64], counts: NDArray[np.int64]) -> Array:
        """:meth:`maxsim` of many queries, each to its own candidates, with the numbers of each alone.

        Args:
            queries: Each query's token vectors [tokens, dim], at least one token each.
            candidates: The examples to score, query by query (``counts[i]`` for query i).
            counts: How many candidates each query has (at least one).

        Returns:
            One MaxSim per candidate [len(candidates)], aligned with ``candidates``.
        """
        out = np.empty(len(candidates), dtype=np.float32)
        lengths = self.lengths[candidates]  # token rows of each candidate
        ends = lengths.cumsum()
        starts = ends - lengths  # each candidate's first column, counted over all the queries
        rows = np.arange(ends[-1]) + (self.starts[candidates] - starts).repeat(lengths)  # bank rows, in order
        first = counts.cumsum() - counts  # each query's first candidate
        cols = starts - starts[first].repeat(counts)  # each candidate's first column in its query's product
        last = first + counts
        bounds = zip(first.tolist(), last.tolist(), starts[first].tolist(), ends[last - 1].tolist(), strict=True)
        matrix = self.matrix
        for query, (f, e, a, b) in zip(queries, bounds, strict=True):
            maxima = np.maximum.reduceat(query @ matrix[rows[a:b]].T, cols[f:e], axis=1)
            sums = np.add.reduce(maxima, 0)  # ndarray.mean(axis=0), as its two calls
            out[f:e] = np.true_divide(sums, np.intp(len(query)), out=sums, casting="unsafe")
        return out
