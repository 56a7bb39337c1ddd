"""The lexical (TF-IDF over hashed n-grams) model and its term in the late scorer."""

from __future__ import annotations

import json
import re
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jeeves_router.classify.embedding import EmbeddingClassifier, HashingEncoder, lexical
from jeeves_router.classify.embedding.classifier import DEFAULT_SCORER
from jeeves_router.classify.embedding.late import LateInteractionScorer
from jeeves_router.classify.embedding.lexical import LexicalIndex, text_features
from jeeves_router.classify.types import RouteSpec
from jeeves_router.errors import UsageError

EXAMPLES = ["freeze my bank account", "change my card pin", "how do I transfer money", "book a flight to Rome"]
ROUTES = (
    RouteSpec("banking", "accounts cards transfers", ("freeze my bank account", "change my card pin")),
    RouteSpec("travel", "flights hotels trips", ("book a flight to Rome", "reserve a hotel room")),
)


def fitted() -> LexicalIndex:
    index = LexicalIndex()
    index.fit(EXAMPLES)
    return index


def test_a_text_matches_itself_fully_and_unrelated_text_not_at_all() -> None:
    sims = fitted().similarity(["change my card pin", "qqq zzz", ""])
    assert sims.shape == (3, len(EXAMPLES))
    assert sims[0, 1] == pytest.approx(1.0, abs=1e-5)
    assert sims[0].argmax() == 1
    np.testing.assert_array_equal(sims[1:], 0.0)


def test_character_ngrams_tolerate_typos_and_inflections() -> None:
    sims = fitted().similarity(["freezing my acount", "transfering mony"])
    assert sims[0].argmax() == 0 and sims[0, 0] > 0.3
    assert sims[1].argmax() == 2 and sims[1, 2] > 0.2


def test_rare_words_weigh_more_than_common_ones() -> None:
    index = LexicalIndex()
    index.fit(["my pin", "my card", "my account", "my flight"])
    sims = index.similarity(["pin"])[0]
    assert sims[0] > 0.5 and np.all(sims[1:] == 0.0)


def test_features_are_word_bigram_and_character_ngrams() -> None:
    grams = text_features("Hi yo")
    # words: hi, yo; one bigram; per padded word " hi ": two 3-grams, and the whole of it as the
    # 4-gram and (shorter than 5) as the 5-gram.
    assert sum(grams.values()) == 2 + 1 + 2 * (2 + 1 + 1)
    assert text_features("HI   yo") == grams  # case and spacing do not matter


def test_round_trip_is_exact() -> None:
    index = fitted()
    again = LexicalIndex.from_dict(json.loads(json.dumps(index.to_dict())))
    queries = ["freeze my card", "a flight to Paris", "nothing here"]
    np.testing.assert_allclose(again.similarity(queries), index.similarity(queries), atol=2e-3)  # float16 weights
    np.testing.assert_array_equal(again.features, index.features)
    with pytest.raises(UsageError, match="lexical index"):
        LexicalIndex.from_dict({"n_examples": 1})


def test_late_adds_the_routes_best_lexical_cosine() -> None:
    enc = HashingEncoder()
    texts = [t for r in ROUTES for t in r.examples]
    labels = np.repeat(np.arange(2), 2)
    v, tok = enc.encode_tokens(texts)
    with_lex = LateInteractionScorer(lexical_weight=2.0, prior_tokens=0.0)
    without = LateInteractionScorer(lexical_weight=0.0, prior_tokens=0.0)
    with_lex.fit(v, labels, 2, tok, texts)
    without.fit(v, labels, 2, tok, texts)
    query = ["please freeze my bank account now"]
    qv, qt = enc.encode_tokens(query)
    lexical = fitted_route_max(texts, labels, query)
    np.testing.assert_allclose(with_lex.scores(qv, qt, None, query) - without.scores(qv, qt, None, query),
                               2.0 * lexical, atol=1e-5)  # fmt: skip
    with pytest.raises(UsageError, match="queries' texts"):
        with_lex.scores(qv, qt)


def fitted_route_max(texts: list[str], labels: np.ndarray, query: list[str]) -> np.ndarray:
    index = LexicalIndex()
    index.fit(texts)
    sims = index.similarity(query)
    return np.stack([sims[:, labels == r].max(axis=1) for r in range(int(labels.max()) + 1)], axis=1)


def test_late_is_the_default_and_its_unfitted_confidence_rejects_strangers() -> None:
    clf = EmbeddingClassifier(ROUTES, encoder=HashingEncoder())
    assert DEFAULT_SCORER == "late" and isinstance(clf.scorer, LateInteractionScorer)
    assert clf.calibrator is None
    known = clf.classify_text("change my card pin").scores[0]
    stranger = clf.classify_text("zebra xylophone quartet").scores[0]
    # an example repeated word for word; its four words keep 4/6 of their similarity (short-query prior)
    assert known[0] == "banking" and known[1] > 0.6
    assert stranger[1] < 0.3


def test_saved_late_keeps_lexical_and_pooling_and_old_files_score_without_them(tmp_path: Path) -> None:
    clf = EmbeddingClassifier(ROUTES, encoder=HashingEncoder())
    path = tmp_path / "clf.json"
    clf.save(path)
    again = EmbeddingClassifier.load(path, encoder=HashingEncoder())
    queries = ["freeze the account please", "a hotel in Rome"]
    for a, b in zip(again.classify_batch(queries), clf.classify_batch(queries), strict=True):
        assert [n for n, _ in a.scores] == [n for n, _ in b.scores]
        assert [p for _, p in a.scores] == pytest.approx([p for _, p in b.scores], abs=1e-3)  # float16 tokens
    assert again.scorer.to_dict()["lexical"] == clf.scorer.to_dict()["lexical"]
    # A file written before the lexical term and pooling: it scores as the old scorer did.
    old = EmbeddingClassifier(ROUTES, encoder=HashingEncoder(), scorer_options={"lexical_weight": 0.0, "pooled": False})
    data = old.to_dict()
    del data["scorer"]["lexical_weight"], data["scorer"]["lexical"], data["scorer"]["pooled"]
    loaded = EmbeddingClassifier.from_dict(data, encoder=HashingEncoder())
    assert isinstance(loaded.scorer, LateInteractionScorer) and loaded.scorer.lexical is None
    assert not loaded.scorer.pooled and loaded.scorer.lexical_weight == 0.0
    for a, b in zip(loaded.classify_batch(queries), old.classify_batch(queries), strict=True):
        assert [p for _, p in a.scores] == pytest.approx([p for _, p in b.scores], abs=1e-3)


def test_bad_lexical_settings_and_mismatched_texts_are_usage_errors() -> None:
    with pytest.raises(UsageError, match="lexical_weight must be >= 0"):
        LateInteractionScorer(lexical_weight=-1.0)
    enc = HashingEncoder()
    texts = [t for r in ROUTES for t in r.examples]
    v, tok = enc.encode_tokens(texts)
    with pytest.raises(UsageError, match="one text per example"):
        LateInteractionScorer().fit(v, np.repeat(np.arange(2), 2), 2, tok, texts[:3])


def _reference_features(text: str, char_sizes: tuple[int, ...] = (3, 4, 5)) -> list[tuple[int, int]]:
    """The features spelled out one by one (no cache), in the order they are first counted."""
    words = re.findall(r"[^\W_]+(?:'[^\W_]+)?", text.casefold())
    counts: dict[int, int] = {}

    def add(feature: str) -> None:
        key = zlib.crc32(feature.encode("utf-8")) & (lexical.BUCKETS - 1)
        counts[key] = counts.get(key, 0) + 1

    for i, word in enumerate(words):
        add("w " + word)
        if i:
            add(f"b {words[i - 1]} {word}")
        padded = f" {word} "
        for n in char_sizes:
            for j in range(max(len(padded) - n + 1, 1)):
                add("c " + padded[j : j + n])
    return list(counts.items())


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["pin", "card", "PIN", "café", "don't", "a", "x1", "übergröße", "  ", "!", "Pin's"]))
       .map(" ".join) | st.text(max_size=60))  # fmt: skip
def test_features_match_the_spelled_out_definition_in_content_and_order(text: str) -> None:
    # cached per word, yet the same counts in the same order (weights and sums depend on the order)
    assert list(text_features(text).items()) == _reference_features(text)
    assert list(text_features(text).items()) == _reference_features(text)  # again, from the cache
