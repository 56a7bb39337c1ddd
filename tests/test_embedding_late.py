"""The late-interaction scorer and out-of-scope negatives (HashingEncoder: no model needed)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from jeeves_router.classify.embedding import EmbeddingClassifier, HashingEncoder
from jeeves_router.classify.embedding.encoders import l2_normalise
from jeeves_router.classify.embedding.late import LateInteractionScorer
from jeeves_router.classify.embedding.scorers import make_scorer, scorer_from_dict
from jeeves_router.classify.types import RouteSpec
from jeeves_router.errors import UsageError

ROUTES = (
    RouteSpec("billing", "payments invoices refunds", ("I was charged twice", "refund my payment", "invoice is wrong")),
    RouteSpec("technical", "errors bugs crashes", ("the app crashes", "API returns error 500", "server timeout error")),
    RouteSpec("shipping", "delivery parcels tracking", ("where is my parcel", "tracking number", "late delivery")),
)
NEGATIVES = ("recipe for banana bread", "who won the football match", "tell me a joke about cats")


def unit(*rows: Sequence[float]) -> np.ndarray:
    return l2_normalise(np.asarray(rows, dtype=np.float32))


def test_route_bonus_is_the_best_examples_query_side_maxsim() -> None:
    # Two routes, one example each, hand-made token vectors in 3-d.
    ex0 = unit([1, 0, 0], [0, 1, 0])  # route 0: tokens along x and y
    ex1 = unit([0, 0, 1])  # route 1: one token along z
    vectors = unit([1, 1, 0], [0, 0, 1])
    s = LateInteractionScorer(token_weight=1.0, c=1e-6, token_dims=None, prior_tokens=0.0)  # c tiny: ~uniform
    s.fit(vectors, np.array([0, 1]), 2, [ex0, ex1])
    query_tokens = unit([1, 0, 0], [0, 0, 1])
    got = s.scores(unit([1, 0, 1]), [query_tokens])[0]
    # MaxSim(route 0) = mean(max(x.x, x.y), max(z.x, z.y)) = mean(1, 0) = 0.5; route 1: mean(0, 1) = 0.5
    # so the token bonus is equal and only the (near-uniform) regression separates them.
    base = s.scores(unit([1, 0, 1]), [np.zeros((0, 3), np.float32)])[0]  # no tokens: no bonus
    np.testing.assert_allclose(got - base, [0.5, 0.5], atol=1e-6)
    q2 = unit([1, 0, 0], [0, 1, 0])
    got2 = s.scores(unit([1, 1, 0]), [q2])[0] - s.scores(unit([1, 1, 0]), [np.zeros((0, 3), np.float32)])[0]
    np.testing.assert_allclose(got2, [1.0, 0.0], atol=1e-6)


def test_routes_outside_top_k_gain_no_more_than_the_weakest_of_the_top_k() -> None:
    enc = HashingEncoder()
    texts = [t for r in ROUTES for t in r.examples]
    labels = np.repeat(np.arange(3), 3)
    v, tok = enc.encode_tokens(texts)
    s = LateInteractionScorer(top_k=1)
    s.fit(v, labels, 3, tok)
    qv, qt = enc.encode_tokens(["refund the invoice payment"])
    full = LateInteractionScorer(top_k=3)
    full.fit(v, labels, 3, tok)
    top1, all3 = s.scores(qv, qt)[0], full.scores(qv, qt)[0]
    assert top1.argmax() == all3.argmax() == 0
    assert top1[0] == pytest.approx(all3[0], abs=1e-5)  # the top route gets the same bonus
    assert np.all(top1[1:] <= top1[0])


def test_negatives_lower_the_score_of_requests_like_them() -> None:
    plain = EmbeddingClassifier(ROUTES, encoder=HashingEncoder(), scorer="late")
    guarded = EmbeddingClassifier(ROUTES, encoder=HashingEncoder(), scorer="late", negatives=NEGATIVES)
    assert isinstance(guarded.scorer, LateInteractionScorer) and guarded.scorer.has_negatives
    assert not plain.scorer.has_negatives  # type: ignore[attr-defined]
    oos = "a good banana bread recipe"
    _, v, t = guarded._encode([oos])
    drop_oos = plain.scorer.scores(v, t, None, [oos]).max() - guarded.scorer.scores(v, t, None, [oos]).max()
    inside = ["I was charged twice on my card"]
    _, v2, t2 = guarded._encode(inside)
    drop_in = plain.scorer.scores(v2, t2, None, inside).max() - guarded.scorer.scores(v2, t2, None, inside).max()
    assert drop_oos > drop_in + 0.5
    assert guarded.classify_text("I was charged twice on my card").classification.route == "billing"


def test_fit_with_negatives_rejects_out_of_scope_and_keeps_in_scope() -> None:
    clf = EmbeddingClassifier(ROUTES, encoder=HashingEncoder(), scorer="late", negatives=NEGATIVES)
    val = [
        ("charged twice on my card", "billing"), ("refund the payment", "billing"),
        ("app crashes at start", "technical"), ("error 500 from the API", "technical"),
        ("parcel delivery is late", "shipping"), ("tracking number for my parcel", "shipping"),
        ("banana bread with walnuts", "oos"), ("the football match tonight", "oos"), ("a joke about dogs", "oos"),
    ]  # fmt: skip
    rep = clf.fit([t for t, _ in val], [lab for _, lab in val])
    assert rep.threshold.in_scope_accuracy == 1.0 and rep.threshold.oos_recall == 1.0
    assert clf.classify_text("my parcel tracking number").classification.route == "shipping"
    assert not clf.classify_text("football tonight").classification.ok


def test_save_load_keeps_negatives_and_decisions(tmp_path: Path) -> None:
    clf = EmbeddingClassifier(ROUTES, encoder=HashingEncoder(), scorer="late", negatives=NEGATIVES)
    clf.fit(
        ["refund my card", "crash on start", "where is my box", "banana cake"],
        ["billing", "technical", "shipping", "oos"],
    )
    path = tmp_path / "late.json"
    clf.save(path)
    again = EmbeddingClassifier.load(path, encoder=HashingEncoder())
    assert again.negatives == NEGATIVES and isinstance(again.scorer, LateInteractionScorer)
    for text in ("I was charged twice", "the server times out", "late parcel", "banana bread"):
        a, b = clf.classify_text(text), again.classify_text(text)
        assert a.classification.route == b.classification.route
        assert a.scores[0][1] == pytest.approx(b.scores[0][1], abs=0.02)  # token vectors are saved as float16


def test_scorer_round_trip_and_factory() -> None:
    enc = HashingEncoder()
    v, tok = enc.encode_tokens(["a b", "c d", "e f", "g"])
    s = make_scorer("late", top_k=2)
    s.fit(v, np.array([0, 1, 1, 2]), 2, tok)  # label 2 = n_routes: a negative
    again = scorer_from_dict(s.to_dict())
    assert isinstance(again, LateInteractionScorer) and again.has_negatives and again.top_k == 2
    assert again.projection is not None and again.projection.shape == (enc.dim, 128)
    qv, qt = enc.encode_tokens(["a d", "zzz"])
    np.testing.assert_allclose(s.scores(qv, qt), again.scores(qv, qt), atol=0.02)


class _NoTokens:
    """The hashing encoder without encode_tokens."""

    def __init__(self) -> None:
        self.inner = HashingEncoder()
        self.name, self.dim = self.inner.name, self.inner.dim

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return self.inner.encode(texts)


def test_late_over_an_encoder_without_token_vectors_compares_sentences() -> None:
    clf = EmbeddingClassifier(ROUTES, encoder=_NoTokens(), scorer="late")
    res = clf.classify_text("I was charged twice on my card")
    assert res.classification.route == "billing"
    assert clf.classify_text("zebra xylophone quartet").scores[0][1] < res.scores[0][1]


def test_usage_errors_name_the_problem() -> None:
    with pytest.raises(UsageError, match="does not use negatives"):
        EmbeddingClassifier(ROUTES, encoder=HashingEncoder(), scorer="centroid", negatives=NEGATIVES)
    with pytest.raises(UsageError, match="not one string"):
        EmbeddingClassifier(ROUTES, encoder=HashingEncoder(), scorer="late", negatives="banana bread")
    s = LateInteractionScorer()
    with pytest.raises(UsageError, match="token vectors"):
        s.fit(unit([1, 0]), np.array([0]), 1)
    with pytest.raises(UsageError, match="labels must be route indexes"):
        make_scorer("centroid").fit(unit([1, 0], [0, 1]), np.array([0, 1]), 1)  # label 1 = negative: not allowed
    with pytest.raises(UsageError):
        LateInteractionScorer(top_k=0)


@pytest.mark.parametrize("negative", [..., None, 3, b"tell me a joke"])
def test_a_negative_that_is_not_a_text_is_a_usage_error_naming_it(negative: object) -> None:
    # the README once wrote negatives=["tell me a joke", ...]: Ellipsis raised AttributeError ('strip')
    with pytest.raises(UsageError, match=r"negatives\[1\] must be a text \(a request none of the routes should take\)"):
        EmbeddingClassifier(ROUTES, encoder=HashingEncoder(), scorer="late", negatives=["tell me a joke", negative])


def test_hashing_encoder_tokens_are_words() -> None:
    enc = HashingEncoder(dim=64)
    v, tok = enc.encode_tokens(["Refund my payment!", ""])
    assert [len(t) for t in tok] == [3, 1]
    np.testing.assert_allclose(np.linalg.norm(tok[0], axis=1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(v, enc.encode(["Refund my payment!", ""]))


def test_fewer_negative_candidates_never_penalise_more() -> None:
    enc = HashingEncoder()
    texts = [t for r in ROUTES for t in r.examples] + list(NEGATIVES)
    labels = np.r_[np.repeat(np.arange(3), 3), np.full(len(NEGATIVES), 3)]
    v, tok = enc.encode_tokens(texts)
    one = LateInteractionScorer(negative_candidates=1, prior_tokens=0.0)
    every = LateInteractionScorer(negative_candidates=50, prior_tokens=0.0)
    one.fit(v, labels, 3, tok)
    every.fit(v, labels, 3, tok)
    qv, qt = enc.encode_tokens(["banana bread for the football match", "refund my payment", "a joke"])
    a, b = one.scores(qv, qt), every.scores(qv, qt)
    assert np.all(a >= b - 1e-6)  # the max over a subset of negatives is never larger
    free = LateInteractionScorer(negative_candidates=50, negative_weight=0.0, prior_tokens=0.0)
    free.fit(v, labels, 3, tok)
    for row, query in enumerate(qt):
        projected = every._project(query)
        penalty = every.negative_weight * every.negatives.maxsim(projected, np.arange(len(NEGATIVES))).max()
        np.testing.assert_allclose(b[row], free.scores(qv, qt)[row] - penalty, atol=1e-5)


def test_an_example_without_token_vectors_counts_by_its_sentence_vector() -> None:
    vectors = unit([1, 0, 0], [0, 1, 0])
    s = LateInteractionScorer(token_weight=1.0, c=1e-6, token_dims=None, prior_tokens=0.0)
    s.fit(vectors, np.array([0, 1]), 2, [np.zeros((0, 3), np.float32), unit([0, 1, 0])])
    no_bonus = s.scores(unit([1, 0, 0]), [np.zeros((0, 3), np.float32)])[0]
    got = s.scores(unit([1, 0, 0]), [unit([1, 0, 0])])[0] - no_bonus
    np.testing.assert_allclose(got, [1.0, 0.0], atol=1e-6)


def test_a_restricted_request_gives_the_token_bonus_to_its_own_routes() -> None:
    enc = HashingEncoder()
    texts = [t for r in ROUTES for t in r.examples]
    labels = np.repeat(np.arange(3), 3)
    v, tok = enc.encode_tokens(texts)
    s = LateInteractionScorer(top_k=1, token_weight=1.0, token_dims=None, pooled=False, prior_tokens=0.0)
    s.fit(v, labels, 3, tok)
    qv, qt = enc.encode_tokens(["refund my payment, the tracking number is late"])
    base = s.scores(qv, [np.zeros((0, enc.dim), np.float32)])[0]  # the regression alone
    free = s.scores(qv, qt)[0] - base
    global_top = int(base.argmax())
    among = np.array([r for r in range(3) if r != global_top])
    restricted = s.scores(qv, qt, among)[0] - base
    best_of_among = among[np.argmax(base[among])]

    def route_maxsim(route: int) -> float:
        return float(s.examples.maxsim(qt[0], np.flatnonzero(s.example_routes == route)).max())

    expected = route_maxsim(best_of_among)
    # Unrestricted, only the global top gets its own MaxSim; the others get that same value.
    assert free[best_of_among] == pytest.approx(route_maxsim(global_top), abs=1e-5)
    # Restricted, the best allowed route gets its own MaxSim.
    assert restricted[best_of_among] == pytest.approx(expected, abs=1e-5)
    assert expected != pytest.approx(free[best_of_among], abs=1e-3)


def test_classifier_restriction_never_returns_an_excluded_route_with_late() -> None:
    clf = EmbeddingClassifier(ROUTES, encoder=HashingEncoder(), scorer="late", negatives=NEGATIVES)
    res = clf.classify_text("I was charged twice", routes=["technical", "shipping"])
    assert res.scores[0][0] in {"technical", "shipping"}
    assert {name for name, _ in res.scores} <= {"technical", "shipping"}


def test_malformed_saved_scorer_and_bad_options_are_usage_errors() -> None:
    enc = HashingEncoder()
    v, tok = enc.encode_tokens(["a b", "c d", "e"])
    s = LateInteractionScorer()
    s.fit(v, np.array([0, 1, 2]), 2, tok)
    saved = s.to_dict()
    with pytest.raises(UsageError, match="token lengths do not add up"):
        LateInteractionScorer.from_dict({**saved, "example_lengths": [5, 5]})
    with pytest.raises(UsageError, match="token tables do not match"):
        LateInteractionScorer.from_dict({**saved, "example_routes": [0]})
    with pytest.raises(UsageError, match="negative_candidates"):
        LateInteractionScorer(negative_candidates=0)
    with pytest.raises(UsageError, match="token_dims"):
        LateInteractionScorer(token_dims=0)
    with pytest.raises(UsageError, match="queries' token vectors"):
        s.scores(v)
