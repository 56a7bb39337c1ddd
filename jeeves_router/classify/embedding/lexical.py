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
from itertools import accumulate
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ...errors import UsageError
from .arrays import Array, decode_array, encode_array, ragged_arange

__all__ = ["LexicalIndex", "split_words", "text_features"]

_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?", re.UNICODE)
BUCKETS = 1 << 22
_CHAR_SIZES = (3, 4, 5)
_POSTINGS = 1 << 16  # postings scored at a time by LexicalIndex.similarity


def _hash(feature: str) -> int:
    return zlib.crc32(feature.encode("utf-8")) & (BUCKETS - 1)


@lru_cache(maxsize=8192)
def _word_grams(word: str, char_sizes: tuple[int, ...]) -> tuple[int, tuple[int, ...]]:
    """The hashed unigram of ``word`` and its character n-grams (a router sees the same words again and again)."""
    padded = f" {word} "
    chars = [_hash("c " + padded[j : j + n]) for n in char_sizes for j in range(max(len(padded) - n + 1, 1))]
    return _hash("w " + word), tuple(chars)


@lru_cache(maxsize=8192)
def _bigram(first: str, second: str) -> int:
    return _hash(f"b {first} {second}")


def split_words(texts: Sequence[str]) -> list[list[str]]:
    """Each text's words, casefolded, as :func:`text_features` reads them ("don't" is one word)."""
    return [_WORD.findall(text.casefold()) for text in texts]


def _grams(words: Sequence[str], char_sizes: tuple[int, ...]) -> list[int]:
    """Hashed n-grams in a fixed order: per word, its unigram, the bigram ending at it, its character n-grams."""
    grams: list[int] = []
    for i, word in enumerate(words):
        unigram, chars = _word_grams(word, char_sizes)
        grams.append(unigram)
        if i:
            grams.append(_bigram(words[i - 1], word))
        grams += chars
    return grams


def text_features(text: str, char_sizes: tuple[int, ...] = (3, 4, 5)) -> Counter[int]:
    """Hashed n-gram counts of one text (word 1- and 2-grams, character n-grams within words).

    Features are counted in a fixed order (per word: its unigram, the bigram ending at it,
    its character n-grams), so the weights and sums built from them are the same run to run.
    """
    return Counter(_grams(_WORD.findall(text.casefold()), char_sizes))


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
        rows, cols, vals = self._weigh(counts)
        known = cols >= 0
        self._set_postings(rows[known], cols[known], vals[known])

    def _set_postings(self, rows: NDArray[np.int64], cols: NDArray[np.int64], vals: Array) -> None:
        order = np.lexsort((rows, cols))
        self.post_examples, self.post_weights = rows[order], vals[order].astype(np.float32)
        self.starts = np.searchsorted(cols[order], np.arange(len(self.features) + 1)).astype(np.int64)

    def _weigh(self, counters: Sequence[Counter[int]]) -> tuple[NDArray[np.int64], NDArray[np.int64], Array]:
        """Unit-length TF-IDF weights of many texts' features: (text, index position or -1, weight) per feature.

        A text's numbers do not depend on the others' (its length is the sum of its own squares).
        """
        keys: list[int] = []
        counts: list[int] = []
        for c in counters:
            keys += c
            counts += c.values()
        sizes = [len(c) for c in counters]
        keys_ = np.array(keys, dtype=np.int64)
        tf = 1 + np.log(np.array(counts, dtype=np.float64))
        pos = np.searchsorted(self.features, keys_)
        pos = np.minimum(pos, max(len(self.features) - 1, 0))
        found = self.features[pos] == keys_ if len(self.features) else np.zeros(len(keys_), dtype=bool)
        idf = np.where(found, self.idf[pos] if len(self.idf) else 0.0, self.unseen_idf)
        w = tf * idf
        squares, norms = w * w, []
        for start, size in zip(accumulate([0, *sizes[:-1]]), sizes, strict=True):  # numpy's sum of one text's squares
            norms.append(np.sqrt(np.add.reduce(squares[start : start + size])) or 1.0)
        w /= np.repeat(norms, sizes)
        owner = np.repeat(np.arange(len(counters)), sizes)
        return owner, np.where(found, pos, -1), w.astype(np.float32)

    def similarity(self, texts: Sequence[str], words: Sequence[Sequence[str]] | None = None) -> Array:
        """Cosine similarity [len(texts), n_examples] of each text to each indexed example.

        Args:
            texts: The texts.
            words: Their :func:`split_words`, when the caller has them already.
        """
        words = split_words(texts) if words is None else words
        n, width = len(words), self.n_examples
        owner, feats, weights = self._weigh([Counter(_grams(w, _CHAR_SIZES)) for w in words])
        known = feats >= 0
        owner, feats, weights = owner[known], feats[known], weights[known]
        lo = self.starts[feats]
        lengths = self.starts[feats + 1] - lo
        out = np.empty((n, width), dtype=np.float32)
        for start, end, a, b in _chunks(owner, lengths, n):  # the index arrays stay in cache
            idx = ragged_arange(lo[a:b], lengths[a:b])
            cells = self.post_examples[idx]
            if end - start > 1:  # each (text, example) cell adds its terms in the order one text alone would
                cells = cells + ((owner[a:b] - start) * width).repeat(lengths[a:b])
            terms = self.post_weights[idx] * weights[a:b].repeat(lengths[a:b])
            out[start:end] = np.bincount(cells, terms, (end - start) * width).reshape(end - start, width)
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


def _chunks(owner: NDArray[np.int64], lengths: NDArray[np.int64], n: int) -> list[tuple[int, int, int, int]]:
    """Runs of texts with about ``_POSTINGS`` postings in all: (first text, end, first feature, end)."""
    if int(lengths.sum()) <= _POSTINGS:
        return [(0, n, 0, len(owner))]
    text_first = np.searchsorted(owner, np.arange(n + 1))  # each text's first feature
    before = np.concatenate([[0], np.cumsum(lengths)])[text_first]  # postings before each text
    runs, start = [], 0
    while start < n:
        end = min(max(int(np.searchsorted(before, before[start] + _POSTINGS, side="right")) - 1, start + 1), n)
        runs.append((start, end, int(text_first[start]), int(text_first[end])))
        start = end
    return runs
