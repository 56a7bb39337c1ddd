from __future__ import annotations

import numpy as np
import pytest

from jeeves_router.classify.embedding.encoders import l2_normalise
from jeeves_router.classify.embedding.scorers import (
    CentroidScorer,
    LogRegScorer,
    NearestScorer,
    Scorer,
    decode_array,
    encode_array,
    make_scorer,
    scorer_from_dict,
)
from jeeves_router.errors import UsageError


def clusters(seed: int = 0, per: int = 12, d: int = 16, routes: int = 3) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    centers = np.eye(d)[:routes] * 3
    x = np.concatenate([centers[r] + rng.normal(0, 0.6, (per, d)) for r in range(routes)])
    y = np.repeat(np.arange(routes), per)
    return l2_normalise(x), y.astype(np.int64)


@pytest.mark.parametrize("kind", ["centroid", "nearest", "logreg"])
def test_scorers_separate_clusters(kind: str) -> None:
    x, y = clusters()
    scorer = make_scorer(kind)
    scorer.fit(x, y, 3)
    qx, qy = clusters(seed=1)
    pred = scorer.scores(qx).argmax(axis=1)
    assert (pred == qy).mean() > 0.9


@pytest.mark.parametrize("kind", ["centroid", "nearest", "logreg"])
def test_scorer_json_round_trip_gives_identical_scores(kind: str) -> None:
    x, y = clusters()
    scorer = make_scorer(kind)
    scorer.fit(x, y, 3)
    again = scorer_from_dict(scorer.to_dict())
    assert type(again) is type(scorer)
    qx, _ = clusters(seed=2)
    np.testing.assert_array_equal(scorer.scores(qx), again.scores(qx))


def test_nearest_scores_are_the_best_example_per_route() -> None:
    x = l2_normalise(np.array([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0]], dtype=np.float32))
    s = NearestScorer()
    s.fit(x, np.array([1, 0, 1]), 2)
    q = l2_normalise(np.array([[1.0, 0.1]], dtype=np.float32))
    expected = [q[0] @ x[1], max(q[0] @ x[0], q[0] @ x[2])]
    np.testing.assert_allclose(s.scores(q)[0], expected, rtol=1e-6)


def test_features_add_the_lead_over_the_best_other_route() -> None:
    s = CentroidScorer(margin_weight=0.5)
    f = s.features(np.array([[0.9, 0.5, 0.1]], dtype=np.float32))
    np.testing.assert_allclose(f[0], [0.9 + 0.5 * 0.4, 0.5 - 0.5 * 0.4, 0.1 - 0.5 * 0.8], rtol=1e-6)


def test_logreg_default_confidence_is_a_distribution() -> None:
    p = LogRegScorer().default_confidence(np.array([[2.0, 1.0, -1.0]], dtype=np.float32))
    assert p.sum() == pytest.approx(1.0, rel=1e-6)
    assert p.argmax() == 0


def test_route_without_vectors_is_rejected() -> None:
    x, y = clusters(routes=2)
    with pytest.raises(UsageError, match=r"routes \[2\]"):
        CentroidScorer().fit(x, y, 3)


def test_unknown_scorer_and_bad_options() -> None:
    with pytest.raises(UsageError, match="unknown scorer"):
        make_scorer("svm")
    with pytest.raises(UsageError, match="bad options"):
        make_scorer("centroid", c=3)
    with pytest.raises(UsageError):
        LogRegScorer(c=0)
    with pytest.raises(UsageError, match="unknown scorer kind"):
        scorer_from_dict({"kind": "svm"})
    assert make_scorer(s := CentroidScorer()) is s
    assert isinstance(s, Scorer)


def test_array_codec_is_exact_and_validates() -> None:
    a = np.random.default_rng(0).normal(size=(3, 5)).astype(np.float32)
    np.testing.assert_array_equal(decode_array(encode_array(a)), a)
    with pytest.raises(UsageError):
        decode_array({"shape": [2]})


class _OldStyle(Scorer):
    """A custom scorer written before scorers could read texts (no ``texts`` parameter)."""

    kind = "old-style"

    def fit(self, vectors, labels, n_routes, tokens=None):  # type: ignore[no-untyped-def]
        self.centroids = l2_normalise(np.stack([vectors[labels == r].mean(axis=0) for r in range(n_routes)]))

    def scores(self, queries, tokens=None, among=None):  # type: ignore[no-untyped-def]
        return queries @ self.centroids.T


def test_custom_scorers_without_the_texts_parameter_still_work() -> None:
    from jeeves_router.classify.embedding import EmbeddingClassifier, HashingEncoder
    from jeeves_router.classify.types import RouteSpec

    routes = (RouteSpec("billing", "payments", ("refund my payment",)), RouteSpec("tech", "crashes", ("app crashes",)))
    clf = EmbeddingClassifier(routes, encoder=HashingEncoder(), scorer=_OldStyle())
    assert clf.classify_text("refund my payment please").classification.route == "billing"
    report = clf.fit(["refund the payment", "the app crashes", "banana bread"], ["billing", "tech", "oos"])
    assert report.rows == 3
