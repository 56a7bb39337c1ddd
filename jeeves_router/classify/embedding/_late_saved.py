"""The saved form of a fitted ``late`` scorer (:class:`~.late.LateInteractionScorer`).

JSON-safe data, token vectors as float16 (:func:`~.arrays.encode_array`). Files written
before a later term keep scoring as they did: without ``lexical_weight`` (and its index)
they score without the lexical term, without ``prior_tokens`` without the short-query prior,
without ``pooled`` on the mean sentence vectors alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ...errors import UsageError
from .arrays import Array, decode_array, encode_array
from .lexical import LexicalIndex
from .token_bank import TokenBank

if TYPE_CHECKING:
    from .late import LateInteractionScorer

__all__ = ["late_from_dict", "late_to_dict"]


def late_to_dict(scorer: LateInteractionScorer) -> dict[str, Any]:
    """``scorer`` as JSON-safe data (token vectors as float16)."""
    return {
        "kind": scorer.kind,
        "c": scorer.c,
        "token_weight": scorer.token_weight,
        "negative_weight": scorer.negative_weight,
        "top_k": scorer.top_k,
        "negative_candidates": scorer.negative_candidates,
        "token_dims": scorer.token_dims,
        "projection": None if scorer.projection is None else encode_array(scorer.projection, "float16"),
        "iterations": scorer.iterations,
        "learning_rate": scorer.learning_rate,
        "n_routes": scorer.n_routes,
        "weights": encode_array(scorer.weights),
        "bias": encode_array(scorer.bias),
        "example_routes": [int(r) for r in scorer.example_routes],
        "example_lengths": [int(n) for n in scorer.examples.lengths],
        "example_tokens": encode_array(scorer.examples.matrix, "float16"),
        "negative_lengths": [int(n) for n in scorer.negatives.lengths],
        "negative_tokens": encode_array(scorer.negatives.matrix, "float16"),
        "negative_vectors": encode_array(scorer.negative_vectors),
        "lexical_weight": scorer.lexical_weight,
        "pooled": scorer.pooled,
        "lexical": None if scorer.lexical is None else scorer.lexical.to_dict(),
        "prior_tokens": scorer.prior_tokens,
        "unrelated": scorer.unrelated,
        "unrelated_lexical": scorer.unrelated_lexical,
    }


def late_from_dict(cls: type[LateInteractionScorer], d: Mapping[str, Any]) -> LateInteractionScorer:
    """A fitted ``cls`` rebuilt from :func:`late_to_dict` output (a UsageError for a malformed one)."""
    keys = ("c", "token_weight", "negative_weight", "top_k", "negative_candidates", "token_dims", "iterations",
            "learning_rate")  # fmt: skip
    # Files written before the lexical term have neither key: they score without it; files
    # written before the short-query prior score without it (prior_tokens 0).
    scorer = cls(**{k: d[k] for k in keys}, lexical_weight=float(d.get("lexical_weight", 0.0)),
                 pooled=bool(d.get("pooled", False)), prior_tokens=float(d.get("prior_tokens", 0.0)))  # fmt: skip
    scorer.unrelated = float(d.get("unrelated", 0.0))
    scorer.unrelated_lexical = float(d.get("unrelated_lexical", 0.0))
    scorer.lexical = None if d.get("lexical") is None else LexicalIndex.from_dict(d["lexical"])
    scorer.projection = None if d.get("projection") is None else decode_array(d["projection"])
    scorer.n_routes = int(d["n_routes"])
    scorer.weights, scorer.bias = decode_array(d["weights"]), decode_array(d["bias"])
    scorer.example_routes = np.asarray(d["example_routes"], dtype=np.int64)
    scorer.examples = _split(decode_array(d["example_tokens"]), d["example_lengths"])
    scorer.negatives = _split(decode_array(d["negative_tokens"]), d["negative_lengths"])
    scorer.negative_vectors = decode_array(d["negative_vectors"])
    if len(scorer.examples.lengths) != len(scorer.example_routes):
        raise UsageError("malformed 'late' scorer: token tables do not match the examples")
    scorer._index_routes()
    return scorer


def _split(matrix: Array, lengths: Sequence[int]) -> TokenBank:
    """The token bank saved as one ``matrix`` of every text's token rows, ``lengths`` rows each."""
    if not lengths:
        return TokenBank([])
    if int(sum(lengths)) != len(matrix):
        raise UsageError("malformed 'late' scorer: token lengths do not add up")
    return TokenBank(np.split(matrix, np.cumsum(lengths)[:-1]))
