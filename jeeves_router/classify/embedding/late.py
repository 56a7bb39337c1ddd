"""Late-interaction scoring: a linear model on sentence vectors, refined word by word.

:class:`LateInteractionScorer` combines four signals, each measured on CLINC150 ``val``:

1. A softmax regression on the sentence vectors (with ``pooled``, also the max-pool of their
   token vectors, which keeps the strongest word features the mean blurs) ranks the routes. When out-of-scope examples
   are given (``EmbeddingClassifier(negatives=...)``) they form one extra class, and the
   probability of that class lowers every route's score.
2. For the ``top_k`` best routes, a late-interaction similarity: each query token is matched
   to its closest token in an example, those similarities are averaged over the query, and
   the route keeps its best example (the query-side MaxSim of ColBERT). A query is accepted
   when *all* of its words find a counterpart in one example, not when its average vector
   happens to land near a route, which is what separates out-of-scope requests.
3. The same similarity to the closest out-of-scope example, subtracted.
4. A lexical similarity: the TF-IDF cosine of the query's words and character n-grams to the
   route's closest example (:mod:`.lexical`); it catches the exact words that decide many
   intents and that sentence vectors blur.

Route score = log P(route | in scope) + ``token_weight`` * MaxSim(route)
+ ``lexical_weight`` * lexical(route) + log P(in scope) - ``negative_weight`` * MaxSim(closest negative).

A one-word query's MaxSim is one noisy draw, not the evidence of ten matched words, so for a
query of n tokens (the larger of its token vectors and its words) each MaxSim s becomes
w * s + (1 - w) * ``unrelated``, w = n / (n + ``prior_tokens``), ``unrelated`` being the mean
MaxSim between examples of different routes (fit time); the lexical cosine likewise, towards
its own such mean (``unrelated_lexical``).

It is best with an encoder that has token vectors (:class:`~.encoders.TokenEncoder`: MiniLM or
the hashing encoder of the tests); with any other encoder each text's sentence vector stands
for its only token, so MaxSim becomes the cosine to the closest example.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ...errors import UsageError
from ._late_saved import late_from_dict, late_to_dict
from ._prior import PRIOR_TOKENS, shrink_weights, unrelated_similarities
from ._softmax import softmax_rows, train_softmax
from .arrays import Array, ragged_arange
from .encoders import l2_normalise
from .lexical import LexicalIndex, split_words
from .scorers import Scorer
from .token_bank import TokenBank, by_token_count, project

__all__ = ["LateInteractionScorer", "LEXICAL_WEIGHT", "PRIOR_TOKENS", "shrink_weights"]

LEXICAL_WEIGHT = 2.0
_CHUNK = 128  # queries scored together: bounds the memory of their token products


class LateInteractionScorer(Scorer):
    """Softmax regression plus token-level MaxSim, with optional out-of-scope examples.

    The most accurate scorer measured (``bench/routing_accuracy.py``) and the default. After
    the encoder it took 0.45 ms for one query on 150 routes with 11 texts each and 100
    negatives, and 0.17 ms per query in a batch of 256 (0.30 and 0.12 on the shipped desk).
    Saved files carry every example's token vectors (float16, 128 dimensions) and the lexical
    index, so they are larger than with the other scorers (about 0.6 MB for 5 routes with 10
    examples each).

    Args:
        c: Inverse L2 strength of the regression.
        token_weight: Weight of the route's MaxSim.
        negative_weight: Weight of the closest negative example's MaxSim.
        top_k: Routes (by regression) that get a MaxSim; the others gain no more than the
            weakest of them. 3 measured as good as 10 on CLINC150 at a third of the cost.
        negative_candidates: How many negatives (the closest by sentence vector) get a MaxSim;
            16 of 100 measured the same as all 100 on CLINC150.
        token_dims: Token vectors are projected on their top principal directions (fitted on
            the examples' tokens) and re-normalised, which makes MaxSim about three times
            cheaper at equal accuracy on CLINC150; ``None`` keeps the encoder's dimensions.
        iterations: Optimiser steps of the regression.
        learning_rate: Adam step size of the regression.
        lexical_weight: Weight of the lexical similarity (0: none). It needs the texts, which
            :class:`~.classifier.EmbeddingClassifier` always gives; fitted directly without
            them, the scorer has no lexical term.
        pooled: Feed the regression the max-pool of the token vectors beside the sentence vector.
        prior_tokens: Strength of the short-query prior, in tokens: a query of n tokens keeps
            n / (n + prior_tokens) of its MaxSim and lexical similarities and takes the rest from
            the mean similarity between examples of different routes (0: no prior, as files
            saved before it have).
    """

    kind = "late"
    uses_tokens = True
    uses_negatives = True
    uses_texts = True

    def __init__(
        self,
        *,
        c: float = 10.0,
        token_weight: float = 8.0,
        negative_weight: float = 3.0,
        top_k: int = 3,
        negative_candidates: int = 16,
        token_dims: int | None = 128,
        iterations: int = 300,
        learning_rate: float = 0.05,
        lexical_weight: float = LEXICAL_WEIGHT,
        pooled: bool = True,
        prior_tokens: float = PRIOR_TOKENS,
    ) -> None:
        if c <= 0 or iterations < 1 or learning_rate <= 0 or top_k < 1:
            raise UsageError("LateInteractionScorer: c > 0, iterations >= 1, learning_rate > 0 and top_k >= 1")
        if negative_candidates < 1:
            raise UsageError("LateInteractionScorer: negative_candidates must be >= 1")
        if token_dims is not None and token_dims < 1:
            raise UsageError("LateInteractionScorer: token_dims must be >= 1 or None")
        if token_weight < 0 or negative_weight < 0 or lexical_weight < 0:
            raise UsageError("LateInteractionScorer: token_weight, negative_weight and lexical_weight must be >= 0")
        if not prior_tokens >= 0 or not np.isfinite(prior_tokens):
            raise UsageError("LateInteractionScorer: prior_tokens must be a finite number >= 0")
        self.c, self.token_weight, self.negative_weight, self.top_k = c, token_weight, negative_weight, top_k
        self.iterations, self.learning_rate, self.token_dims = iterations, learning_rate, token_dims
        self.negative_candidates, self.lexical_weight, self.pooled = negative_candidates, lexical_weight, pooled
        self.prior_tokens = float(prior_tokens)
        self.unrelated = 0.0  # mean MaxSim between examples of different routes (fit)
        self.unrelated_lexical = 0.0  # the same for the lexical cosine
        self.lexical: LexicalIndex | None = None
        self.negative_vectors: Array = np.zeros((0, 0), dtype=np.float32)
        self.projection: Array | None = None
        self.n_routes = 0
        self.weights: Array = np.zeros((0, 0), dtype=np.float32)
        self.bias: Array = np.zeros(0, dtype=np.float32)
        self.example_routes: NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self.examples = TokenBank([])
        self.negatives = TokenBank([])
        self._route_order: NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self._route_starts: NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self._route_sizes: NDArray[np.int64] = np.zeros(0, dtype=np.int64)

    @property
    def has_negatives(self) -> bool:
        """Whether out-of-scope examples were given to :meth:`fit`."""
        return bool(self.weights.shape[1] > self.n_routes)

    def fit(
        self,
        vectors: Array,
        labels: NDArray[np.int64],
        n_routes: int,
        tokens: Sequence[Array] | None = None,
        texts: Sequence[str] | None = None,
    ) -> None:
        """See :meth:`Scorer.fit`; label ``n_routes`` marks an out-of-scope example."""
        self._check(vectors, labels, n_routes)
        if tokens is None or len(tokens) != len(labels):
            raise UsageError("the 'late' scorer needs token vectors: use an encoder with encode_tokens (MiniLMEncoder)")
        # An example without token vectors stands for itself with its sentence vector.
        tokens = [t if len(t) else vectors[i : i + 1] for i, t in enumerate(tokens)]
        negative = labels == n_routes
        classes = n_routes + 1 if negative.any() else n_routes
        self.n_routes = n_routes
        self.weights, self.bias = train_softmax(
            self._regression_input(vectors, tokens), labels, classes, c=self.c, iterations=self.iterations,
            learning_rate=self.learning_rate,
        )  # fmt: skip
        keep = np.flatnonzero(~negative)
        self.example_routes = labels[keep].astype(np.int64)
        in_scope = [tokens[int(i)] for i in keep]
        self.projection = self._principal_directions(in_scope)
        self.examples = TokenBank([self._project(t) for t in in_scope])
        self.negatives = TokenBank([self._project(tokens[int(i)]) for i in np.flatnonzero(negative)])
        self.negative_vectors = np.ascontiguousarray(vectors[negative], dtype=np.float32)
        self.lexical = None
        if self.lexical_weight and texts is not None:  # without texts (direct use): no lexical term
            if len(texts) != len(labels):
                raise UsageError("LateInteractionScorer.fit: give one text per example")
            self.lexical = LexicalIndex()
            self.lexical.fit([texts[int(i)] for i in keep])
        self._index_routes()
        in_scope_texts = None if texts is None or self.lexical is None else [texts[int(i)] for i in keep]
        self.unrelated, self.unrelated_lexical = unrelated_similarities(
            self.examples, self.example_routes, self.lexical, in_scope_texts
        )

    def _query_weights(self, tokens: Sequence[Array], words: Sequence[Sequence[str]] | None) -> Array | None:
        """Each query's :func:`shrink_weights` weight (None: no prior); n is max(token vectors, words)."""
        if not self.prior_tokens:
            return None
        counts = [max(len(t), len(words[i]) if words else 0) for i, t in enumerate(tokens)]
        return shrink_weights(counts, self.prior_tokens)

    def _regression_input(
        self, vectors: Array, tokens: Sequence[Array], groups: list[tuple[NDArray[np.int64], Array]] | None = None
    ) -> Array:
        """The regression's input: the sentence vectors, with ``pooled`` also their tokens' max-pool.

        ``groups`` are the tokens :func:`~.token_bank.by_token_count` (computed when not given).
        """
        if not self.pooled:
            return vectors
        peaks = np.array(vectors, dtype=np.float32)  # a text without tokens stands for itself
        for idx, block in by_token_count(tokens) if groups is None else groups:
            peaks[idx] = block.max(axis=1)
        out: Array = (np.hstack([vectors, l2_normalise(peaks)]) / np.sqrt(2.0)).astype(np.float32)
        return out

    def _principal_directions(self, tokens: Sequence[Array]) -> Array | None:
        stacked = np.vstack(tokens).astype(np.float64)
        if self.token_dims is None or self.token_dims >= stacked.shape[1]:
            return None
        _, vectors = np.linalg.eigh(stacked.T @ stacked)  # ascending eigenvalues
        top: Array = np.ascontiguousarray(vectors[:, ::-1][:, : self.token_dims], dtype=np.float32)
        return top

    def _project(self, tokens: Array) -> Array:
        return tokens if self.projection is None else l2_normalise(tokens @ self.projection)

    def _index_routes(self) -> None:
        self._route_order = np.argsort(self.example_routes, kind="stable")  # examples, route by route
        self._route_starts = np.searchsorted(self.example_routes[self._route_order], np.arange(self.n_routes))
        self._route_sizes = np.bincount(self.example_routes, minlength=self.n_routes).astype(np.int64)

    def _lexical_scores(self, texts: Sequence[str], words: Sequence[Sequence[str]] | None) -> Array | None:
        """Each route's best lexical cosine [n, n_routes] to the query texts (None: not used)."""
        if self.lexical is None or not self.lexical_weight:
            return None
        sims = self.lexical.similarity(texts, words)[:, self._route_order]
        best: Array = np.maximum.reduceat(sims, self._route_starts, axis=1)
        return best

    def scores(
        self,
        queries: Array,
        tokens: Sequence[Array] | None = None,
        among: NDArray[np.int64] | None = None,
        texts: Sequence[str] | None = None,
    ) -> Array:
        """See :meth:`Scorer.scores`; the MaxSim goes to the best ``top_k`` routes of ``among``.

        A query's scores are the same, to the last bit, alone or among others: a batch is
        scored with one query's arithmetic (see :mod:`.token_bank`), in chunks of 128.
        """
        if tokens is None or len(tokens) != len(queries):
            raise UsageError("the 'late' scorer needs the queries' token vectors")
        if self.lexical is not None and self.lexical_weight and (texts is None or len(texts) != len(queries)):
            raise UsageError("the 'late' scorer with lexical_weight > 0 needs the queries' texts")
        pool = np.arange(self.n_routes) if among is None else np.asarray(among, dtype=np.int64)
        if len(queries) <= _CHUNK:
            return self._score_chunk(queries, tokens, pool, texts).astype(np.float32)
        parts = [
            self._score_chunk(
                queries[i : i + _CHUNK], tokens[i : i + _CHUNK], pool, None if texts is None else texts[i : i + _CHUNK]
            )
            for i in range(0, len(queries), _CHUNK)
        ]
        return np.concatenate(parts).astype(np.float32)

    def _score_chunk(
        self, queries: Array, tokens: Sequence[Array], pool: NDArray[np.int64], texts: Sequence[str] | None
    ) -> Array:
        groups = by_token_count(tokens)
        inputs = self._regression_input(queries, tokens, groups)
        # One matrix-vector product per query, as for a query alone (a matrix product rounds differently).
        logits = np.matmul(inputs[:, None, :], self.weights)[:, 0] + self.bias
        logits -= logits.max(axis=1, keepdims=True)
        # log P(route); with negatives this is log P(route | in scope) + log P(in scope).
        out: Array = (logits - np.log(np.exp(logits).sum(axis=1, keepdims=True)))[:, : self.n_routes]
        words = split_words(texts) if texts is not None and len(texts) == len(tokens) else None
        weights = self._query_weights(tokens, words)
        k = min(self.top_k, len(pool))
        projected = project(groups, self.projection, len(tokens)) if k else []
        live = [i for i, t in enumerate(projected) if len(t)]  # the texts with token vectors
        if live:
            rows = slice(None) if len(live) == len(tokens) else np.array(live)
            self._add_maxsim(out, queries, rows, [projected[i] for i in live], pool, k, weights)
        lexical = None if texts is None else self._lexical_scores(texts, words)
        if lexical is not None:
            if weights is not None:
                lexical = weights[:, None] * lexical + (1 - weights[:, None]) * np.float32(self.unrelated_lexical)
            out += self.lexical_weight * lexical
        return out

    def _add_maxsim(
        self,
        out: Array,
        queries: Array,
        live: NDArray[np.int64] | slice,
        tokens: list[Array],
        pool: NDArray[np.int64],
        k: int,
        weights: Array | None,
    ) -> None:
        """Add the ``live`` rows' MaxSim bonus of their top ``k`` routes and subtract their closest negative's."""
        n = len(tokens)
        if k < len(pool):
            best = pool[np.argpartition(-out[live][:, pool], k - 1, axis=1)[:, :k]]
        else:
            best = np.tile(pool, (n, 1))
        sizes = self._route_sizes[best]  # each query's candidates: the examples of its best routes, route by route
        flat = sizes.ravel()
        candidates = self._route_order[ragged_arange(self._route_starts[best].ravel(), flat)]
        per_example = self.examples.maxsim_batch(tokens, candidates, np.add.reduce(sizes, 1))
        sims = np.maximum.reduceat(per_example, flat.cumsum() - flat).reshape(n, k)
        if weights is not None:  # a short query's MaxSim is one noisy draw: shrink it towards unrelated
            sims = weights[live, None] * sims + (1 - weights[live, None]) * np.float32(self.unrelated)
        # Routes outside the top k gain no more than the weakest of the top k.
        bonus = np.minimum.reduce(sims, 1, keepdims=True).repeat(self.n_routes, axis=1)
        bonus[np.arange(n)[:, None], best] = sims
        out[live] += self.token_weight * bonus
        if not (self.has_negatives and self.negative_weight):
            return
        m = min(self.negative_candidates, len(self.negative_vectors))
        near = np.matmul(queries[live][:, None, :], self.negative_vectors.T)[:, 0]  # per query, as above
        if m < near.shape[1]:
            closest = np.argpartition(-near, m - 1, axis=1)[:, :m]
        else:
            closest = np.tile(np.arange(near.shape[1]), (n, 1))
        negative = self.negatives.maxsim_batch(tokens, closest.ravel(), np.full(n, closest.shape[1]))
        nearest = np.maximum.reduce(negative.reshape(n, -1), 1).astype(np.float64)
        if weights is not None:
            share = weights[live].astype(np.float64)
            nearest = share * nearest + (1 - share) * self.unrelated
        out[live] -= (self.negative_weight * nearest).astype(np.float32)[:, None]

    def default_confidence(self, features: Array) -> Array:
        """The evidence share of a route's score, clipped to [0, 1] (uncalibrated).

        A route's score is at most ``token_weight + lexical_weight`` (log-probability 0, every
        word matched exactly); its share of that maximum is near 1 for a request that repeats
        an example and falls towards 0 for words no example contains, so an unfitted
        classifier already rejects out-of-scope requests. With the short-query prior
        (``prior_tokens``) a short request cannot reach the maximum even when its words match
        exactly: with the default 2, a one-word request matched perfectly keeps a third of its
        MaxSim and lexical similarity, the rest being what unrelated examples score. Without
        token and lexical terms the softmax over the routes is used.
        """
        scale = self.token_weight + self.lexical_weight
        if scale <= 0:
            return softmax_rows(features)
        out: Array = np.clip(features / scale, 0.0, 1.0).astype(np.float32)
        return out

    def to_dict(self) -> dict[str, Any]:
        """See :meth:`Scorer.to_dict` (token vectors are stored as float16)."""
        return late_to_dict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LateInteractionScorer:
        """Rebuild a fitted scorer from :meth:`to_dict` output."""
        return late_from_dict(cls, d)
