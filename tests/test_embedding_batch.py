"""A batch is scored with each query's own arithmetic: the same scores, to the last bit, as one by one.

HashingEncoder encodes each text on its own, so batch and one-by-one get the same vectors and
any difference would come from the scorer or the classifier.
"""

from __future__ import annotations

import copy
import random
from typing import Any

import numpy as np
import pytest

from jeeves_router.classify.embedding import EmbeddingClassifier, HashingEncoder
from jeeves_router.classify.embedding.late import LateInteractionScorer
from jeeves_router.classify.embedding.token_bank import TokenBank
from jeeves_router.classify.types import RouteSpec

_SYLLABLES = ("ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "pe", "da", "gu", "zi", "ba", "fo", "he", "ju")


def _words(rng: random.Random, n: int) -> list[str]:
    return sorted({"".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 4))) for _ in range(n)})


def _sentence(rng: random.Random, keys: list[str], common: list[str], n: int) -> str:
    return " ".join(rng.choice(keys) if rng.random() < 0.6 else rng.choice(common) for _ in range(n))


def clinc_like(routes: int = 60, examples: int = 8, negatives: int = 40) -> tuple[list[RouteSpec], list[str], Any]:
    """Many routes of short made-up requests, out-of-scope examples, and a query maker."""
    rng = random.Random(0)
    vocab = _words(rng, 700)
    common, rest = vocab[:30], vocab[30:]
    keys = [rng.sample(rest, 6) for _ in range(routes)]

    def examples_of(r: int) -> tuple[str, ...]:
        return tuple(_sentence(rng, keys[r], common, rng.randint(2, 14)) for _ in range(examples))

    specs = [RouteSpec(f"intent_{r}", _sentence(rng, keys[r], common, 4), examples_of(r)) for r in range(routes)]
    outside = [_sentence(rng, vocab, common, rng.randint(2, 10)) for _ in range(negatives)]

    def queries(n: int) -> tuple[list[str], list[str]]:
        """``n`` requests for known routes and out of scope, then odd ones; with their labels."""
        labels = [rng.choice([*(s.name for s in specs), "oos"]) for _ in range(n)]
        texts = [_sentence(rng, keys[int(lab.split("_")[1])] if lab != "oos" else rest, common, rng.randint(1, 30))
                 for lab in labels]  # fmt: skip
        # one word, unknown words, a word repeated, punctuation around words, a long request
        odd = ["ka", "qqq zzz xxx", "ka ka ka ka ka ka ka ka ka ka", "ka... lo? mi!", " ".join(common * 3)]
        return texts + odd, labels + ["oos"] * len(odd)

    return specs, outside, queries


@pytest.fixture(scope="module")
def fitted() -> tuple[EmbeddingClassifier, Any]:
    routes, negatives, queries = clinc_like()
    clf = EmbeddingClassifier(routes, encoder=HashingEncoder(dim=256), negatives=negatives,
                              scorer_options={"iterations": 40})  # fmt: skip
    clf.fit(*queries(150))
    return clf, lambda n: queries(n)[0]


def scores_both_ways(s: LateInteractionScorer, enc: HashingEncoder, texts: list[str], among: Any = None) -> Any:
    v, tok = enc.encode_tokens(texts)
    tok[3] = tok[3][:0]  # a text without token vectors scores by its sentence vector alone
    batch = s.scores(v, tok, among, texts=texts)
    one = [s.scores(v[i : i + 1], tok[i : i + 1], among, texts=texts[i : i + 1]) for i in range(len(v))]
    return batch, np.concatenate(one)


@pytest.mark.parametrize(
    "change",
    [{}, {"top_k": 1}, {"negative_candidates": 1000}, {"prior_tokens": 0.0}, {"lexical_weight": 0.0}],
    ids=["default", "top_k=1", "every negative", "no prior", "no lexical"],
)
def test_batch_scores_are_the_one_by_one_scores_to_the_bit(fitted: Any, change: dict[str, Any]) -> None:
    clf, queries = fitted
    s = copy.copy(clf.scorer)
    for key, value in change.items():
        setattr(s, key, value)
    texts = queries(140)  # more than one chunk of 128 queries, and of lexical postings
    for among in (None, np.array([7, 2, 30, 45])):
        batch, alone = scores_both_ways(s, clf.encoder, texts, among)
        assert batch.dtype == alone.dtype == np.float32
        assert batch.tobytes() == alone.tobytes()


@pytest.mark.parametrize(
    "options",
    [{"token_dims": None}, {"pooled": False}, {"top_k": 1, "prior_tokens": 0.0}],
    ids=["no projection", "not pooled", "one candidate"],
)
def test_batch_scores_match_for_other_fits(options: dict[str, Any]) -> None:
    # One example per route and one negative: a query's only candidate is one example, whose
    # token means numpy sums pairwise (not in order) from 9 tokens on.
    routes, _, queries = clinc_like(routes=12, examples=1, negatives=0)
    clf = EmbeddingClassifier(routes, encoder=HashingEncoder(dim=256), negatives=["qqq zzz"], use_descriptions=False,
                              scorer_options={"iterations": 20, **options})  # fmt: skip
    batch, alone = scores_both_ways(clf.scorer, clf.encoder, queries(40)[0])
    assert batch.tobytes() == alone.tobytes()


def test_classify_batch_gives_exactly_the_one_by_one_results(fitted: Any) -> None:
    clf, queries = fitted
    texts = [*queries(150), "   "]
    for routes in (None, [r.name for r in clf.routes[::4]]):
        batch = clf.classify_batch(texts, routes)
        assert batch == [clf.classify_text(t, routes) for t in texts]  # routes, confidences, scores, reasons
    assert {r.classification.status for r in batch} >= {"ok", "missing_route", "empty"}


def test_token_bank_scores_each_query_as_alone() -> None:
    rng = np.random.default_rng(0)
    bank = TokenBank([rng.standard_normal((int(n), 8)).astype(np.float32) for n in rng.integers(1, 12, 30)])
    queries = [rng.standard_normal((int(n), 8)).astype(np.float32) for n in (1, 2, 9, 17, 9)]
    candidates = [np.array([3]), np.array([0, 5, 5, 29]), np.array([4]), rng.permutation(30), np.array([1, 2])]
    got = bank.maxsim_batch(queries, np.concatenate(candidates), np.array([len(c) for c in candidates]))
    expected = []
    for q, c in zip(queries, candidates, strict=True):  # the arithmetic of one query alone, written out
        rows = np.concatenate([np.arange(bank.starts[e], bank.starts[e] + bank.lengths[e]) for e in c])
        firsts = np.concatenate([[0], np.cumsum(bank.lengths[c])[:-1]])
        expected.append(np.maximum.reduceat(q @ bank.matrix[rows].T, firsts, axis=1).mean(axis=0))
    assert got.tobytes() == np.concatenate(expected).tobytes()
    assert bank.maxsim(queries[2], candidates[2]).tobytes() == expected[2].tobytes()
