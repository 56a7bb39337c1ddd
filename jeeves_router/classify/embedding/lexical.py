"""A lexical model of the route examples: TF-IDF over hashed word and character n-grams.

Sentence vectors blur the words that decide many intents ("pin" vs "password", "freeze" vs
"block"); character n-grams keep them, and tolerate typos and inflections. Each text becomes
a sparse vector of hashed features (word unigrams and bigrams, character 3- to 5-grams inside
word boundaries) weighted by sublinear term frequency times inverse document frequency over
the examples, scaled to unit length. The cosine of two texts is the dot product of their
vectors; the examples are kept as an inverted index so one query costs a few thousand
multiply-adds. Pure numpy, hashed with CRC-32 so no vocabulary is stored.
"""

from __future__ import annotations

import re
import zlib
from collections import Counter
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ...errors import UsageError
from .arrays import Array, decode_array, encode_array

__all__ = ["LexicalIndex", "text_features", "word_count"]

_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?", re.UNICODE)
BUCKETS = 1 << 22


def _hash(feature: str) -> int:
    return zlib.crc32(feature.encode("utf-8")) & (BUCKETS - 1)


@lru_cache(maxsize=8192)
def _word_grams(word: str, char_sizes: tuple[int, ...]) -> tuple[int, tuple[int, ...]]:
    """The hashed unigram of ``word`` and its character n-grams (a router sees the same words again and again)."""
    padded = f" {word} "
    chars = [_hash("c " + padded[j : j + n]) for n in char_sizes for j in range(max(len(padded) - n + 1, 1))]
    return _hash("w " + word), tuple(chars)


def word_count(text: str) -> int:
    """How many words ``text`` has, by the same rule as :func:`text_features` ("don't" is one word)."""
    return len(_WORD.findall(text.casefold()))


def text_features(text: str, char_sizes: tuple[int, ...] = (3, 4, 5)) -> Counter[int]:
    """Hashed n-gram counts of one text (word 1- and 2-grams, character n-grams within words).

    Features are counted in a fixed order (per word: its unigram, the bigram ending at it,
    its character n-grams), so the weights and sums built from them are the same run to run.
    """
    words = _WORD.findall(text.casefold())
    grams: Counter[int] = Counter()
    for i, word in enumerate(words):
        unigram, chars = _word_grams(word, char_sizes)
        grams[unigram] += 1
        if i:
            grams[_hash(f"b {words[i - 1]} {word}")] += 1
        grams.update(chars)
    return grams


class LexicalIndex:
    """TF-IDF vectors of the examples, indexed by feature for fast cosine similarity.

    Attributes:
        n_examples: How many example texts were indexed.
    """

    def __init__(self) -> None:
        self.n_examples = 0
        self.features: NDArray[np.int64] = np.zeros(0, dtype=np.int64)  # sorted, unique
        self.idf: Array = np.zeros(0, dtype=np.float32)
        self.starts: NDArray[np.int64] = np.zeros(1, dtype=np.int64)  # postings of features[i]
        self.post_examples: NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self.post_weights: Array = np.zeros(0, dtype=np.float32)
        self.unseen_idf = 1.0

    def fit(self, texts: Sequence[str]) -> None:
        """Index ``texts`` (idf from these texts only)."""
        counts = [text_features(t) for t in texts]
        n = len(counts)
        df: Counter[int] = Counter()
        for c in counts:
            df.update(c.keys())
        self.n_examples = n
        self.features = np.asarray(sorted(df), dtype=np.int64)
        freq = np.asarray([df[int(f)] for f in self.features], dtype=np.float64)
        self.idf = (np.log((1 + n) / (1 + freq)) + 1).astype(np.float32)
        self.unseen_idf = float(np.log(1 + n) + 1)
        rows, cols, vals = [], [], []
        for i, c in enumerate(counts):
            feats, weights = self._weigh(c)
            known = feats >= 0
            rows.append(np.full(int(known.sum()), i, dtype=np.int64))
            cols.append(feats[known])
            vals.append(weights[known])
        self._set_postings(np.concatenate(rows or [np.zeros(0, np.int64)]),
                           np.concatenate(cols or [np.zeros(0, np.int64)]),
                           np.concatenate(vals or [np.zeros(0, np.float32)]))  # fmt: skip

    def _weigh(self, counts: Counter[int]) -> tuple[NDArray[np.int64], Array]:
        """Feature positions (-1: not in the index) and unit-length TF-IDF weights of one text."""
        if not counts:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        keys = np.fromiter(counts.keys(), dtype=np.int64, count=len(counts))
        tf = 1 + np.log(np.fromiter(counts.values(), dtype=np.float64, count=len(counts)))
        pos = np.searchsorted(self.features, keys)
        pos = np.minimum(pos, max(len(self.features) - 1, 0))
        found = self.features[pos] == keys if len(self.features) else np.zeros(len(keys), dtype=bool)
        idf = np.where(found, self.idf[pos] if len(self.idf) else 0.0, self.unseen_idf)
        w = tf * idf
        w /= np.sqrt((w * w).sum()) or 1.0
        return np.where(found, pos, -1), w.astype(np.float32)

    def _set_postings(self, rows: NDArray[np.int64], cols: NDArray[np.int64], vals: Array) -> None:
        order = np.lexsort((rows, cols))
        self.post_examples, self.post_weights = rows[order], vals[order].astype(np.float32)
        self.starts = np.searchsorted(cols[order], np.arange(len(self.features) + 1)).astype(np.int64)

    def similarity(self, texts: Sequence[str]) -> Array:
        """Cosine similarity [len(texts), n_examples] of each text to each indexed example."""
        out = np.zeros((len(texts), self.n_examples), dtype=np.float32)
        for row, text in enumerate(texts):
            feats, weights = self._weigh(text_features(text))
            known = feats >= 0
            feats, weights = feats[known], weights[known]
            if not len(feats):
                continue
            lo, hi = self.starts[feats], self.starts[feats + 1]
            lengths = hi - lo
            idx = np.repeat(lo - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths) + np.arange(lengths.sum())
            out[row] = np.bincount(
                self.post_examples[idx], weights=self.post_weights[idx] * np.repeat(weights, lengths),
                minlength=self.n_examples,
            )  # fmt: skip
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe index (feature ids, idf, postings; posting weights as float16)."""
        cols = np.repeat(np.arange(len(self.features)), np.diff(self.starts))
        return {
            "n_examples": self.n_examples,
            "unseen_idf": self.unseen_idf,
            "features": encode_array(self.features, "int32"),
            "idf": encode_array(self.idf),
            "post_features": encode_array(cols, "int32"),
            "post_examples": encode_array(self.post_examples, "int32"),
            "post_weights": encode_array(self.post_weights, "float16"),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LexicalIndex:
        """Rebuild an index from :meth:`to_dict` output."""
        index = cls()
        try:
            index.n_examples = int(d["n_examples"])
            index.unseen_idf = float(d["unseen_idf"])
            index.features = np.rint(decode_array(d["features"])).astype(np.int64)
            index.idf = decode_array(d["idf"])
            cols = np.rint(decode_array(d["post_features"])).astype(np.int64)
            rows = np.rint(decode_array(d["post_examples"])).astype(np.int64)
            index._set_postings(rows, cols, decode_array(d["post_weights"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise UsageError(f"malformed lexical index in classifier file: {exc!r}") from exc
        return index
