from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from jeeves_router.classify.embedding import EmbeddingClassifier, HashingEncoder
from jeeves_router.classify.types import Classifier, ClassifyRequest, RouteSpec
from jeeves_router.errors import UsageError

ROUTES = (
    RouteSpec("billing", "payments invoices refunds", ("I was charged twice", "refund my payment", "invoice is wrong")),
    RouteSpec("technical", "errors bugs crashes", ("the app crashes", "API returns error 500", "server timeout error")),
    RouteSpec("shipping", "delivery parcels tracking", ("where is my parcel", "tracking number", "late delivery")),
)
VAL = [
    ("charged twice on my card", "billing"),
    ("refund the payment", "billing"),
    ("wrong invoice amount", "billing"),
    ("app crashes at start", "technical"),
    ("error 500 from the API", "technical"),
    ("timeout error on the server", "technical"),
    ("parcel delivery is late", "shipping"),
    ("tracking number for my parcel", "shipping"),
    ("where is my delivery", "shipping"),
    ("quantum chromodynamics lecture", "oos"),
    ("banana bread recipe", "oos"),
    ("football match tonight", "oos"),
]


def make(**kw: object) -> EmbeddingClassifier:
    return EmbeddingClassifier(ROUTES, encoder=HashingEncoder(), **kw)  # type: ignore[arg-type]


def test_it_is_a_classifier_and_ranks_routes() -> None:
    clf = make()
    assert isinstance(clf, Classifier)
    res = clf.classify_text("I was charged twice this month")
    c = res.classification
    assert res.stage == "embedding"
    assert c.ok and c.route == "billing"
    assert c.runner_up in {"technical", "shipping"} and c.runner_up != c.route
    assert 0.0 <= c.runner_up_confidence <= c.confidence <= 1.0  # type: ignore[operator]
    assert c.margin == pytest.approx(c.confidence - c.runner_up_confidence)  # type: ignore[operator]
    assert res.scores[0][0] == "billing"
    assert [p for _, p in res.scores] == sorted((p for _, p in res.scores), reverse=True)


def test_threshold_rejects_as_not_ok_with_a_reason() -> None:
    res = make(threshold=1.0).classify_text("I was charged twice")
    c = res.classification
    assert not c.ok and c.status == "missing_route" and c.route is None and c.confidence == 0.0
    assert "below the threshold" in (c.reason or "")
    assert res.scores[0][0] == "billing"  # the ranking is still reported


def test_fit_calibrates_and_chooses_a_threshold() -> None:
    clf = make()
    report = clf.fit([t for t, _ in VAL], [lab for _, lab in VAL])
    assert clf.calibrator is not None and clf.threshold is not None
    assert 0.0 <= clf.threshold <= 1.0
    assert report.rows == len(VAL) and report.oos_rows == 3
    assert report.threshold.oos_recall > 0.5
    assert clf.classify_text("charged twice, refund please").classification.route == "billing"
    assert not clf.classify_text("banana bread recipe").classification.ok


def test_fit_rejects_unknown_labels() -> None:
    with pytest.raises(UsageError, match="unknown route labels"):
        make().fit(["a", "b"], ["billing", "weather"])


@pytest.mark.parametrize("scorer", ["centroid", "nearest", "logreg"])
@pytest.mark.parametrize("calibration", ["platt", "isotonic"])
def test_save_load_round_trip(tmp_path: Path, scorer: str, calibration: str) -> None:
    clf = make(scorer=scorer)
    clf.fit([t for t, _ in VAL], [lab for _, lab in VAL], calibration=calibration)  # type: ignore[arg-type]
    path = tmp_path / "clf.json"
    clf.save(path)
    data = json.loads(path.read_text())
    assert data["format"] == "jeeves-router/embedding-classifier" and data["scorer"]["kind"] == scorer
    again = EmbeddingClassifier.load(path, encoder=HashingEncoder())
    assert again.threshold == clf.threshold and again.route_names == clf.route_names
    for text in ("where is my parcel", "banana bread", "API error"):
        assert again.classify_text(text) == clf.classify_text(text)


def test_load_with_another_encoder_or_bad_file_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "clf.json"
    make().save(path)
    with pytest.raises(UsageError, match="saved with encoder"):
        EmbeddingClassifier.load(path, encoder=HashingEncoder(dim=64))
    with pytest.raises(UsageError, match="file not found"):
        EmbeddingClassifier.load(tmp_path / "nope.json", encoder=HashingEncoder())
    (tmp_path / "bad.json").write_text("{\n  oops\n}")
    with pytest.raises(UsageError, match=r"bad.json:2"):
        EmbeddingClassifier.load(tmp_path / "bad.json", encoder=HashingEncoder())
    (tmp_path / "other.json").write_text('{"format": "something-else"}')
    with pytest.raises(UsageError, match="not a saved EmbeddingClassifier"):
        EmbeddingClassifier.load(tmp_path / "other.json", encoder=HashingEncoder())


def test_construction_errors() -> None:
    enc = HashingEncoder()
    with pytest.raises(UsageError, match="at least one route"):
        EmbeddingClassifier([], encoder=enc)
    with pytest.raises(UsageError, match="duplicate"):
        EmbeddingClassifier([ROUTES[0], ROUTES[0]], encoder=enc)
    with pytest.raises(UsageError, match="no examples and no description"):
        EmbeddingClassifier([RouteSpec("empty")], encoder=enc)
    with pytest.raises(UsageError, match="threshold"):
        EmbeddingClassifier(ROUTES, encoder=enc, threshold=1.5)


def test_request_routes_restrict_the_choice() -> None:
    clf = make()
    res = clf.classify_text("I was charged twice", routes=["technical", "shipping"])
    assert res.classification.route in {"technical", "shipping"}
    assert {n for n, _ in res.scores} == {"technical", "shipping"}
    none = clf.classify_text("I was charged twice", routes=["unknown"])
    assert none.classification.status == "missing_route"


def test_blank_text_is_empty_and_batch_matches_single() -> None:
    clf = make()
    assert clf.classify_text("   ").classification.status == "empty"
    texts = ["refund my payment", "", "the app crashes"]
    batch = clf.classify_batch(texts)
    assert batch[1].classification.status == "empty"
    for text, res in zip(texts, batch, strict=True):
        if text:
            single = clf.classify_text(text)
            assert res.classification.route == single.classification.route
            np.testing.assert_allclose([p for _, p in res.scores], [p for _, p in single.scores], rtol=1e-5)


@pytest.mark.anyio
@pytest.mark.parametrize("offload", [True, False, "auto"])
async def test_async_classify_gives_the_sync_answer(offload: object) -> None:
    clf = make(offload=offload)
    req = ClassifyRequest("where is my parcel", ROUTES)
    first = await clf.classify(req)
    second = await clf.classify(req)
    assert first == second == clf.classify_text("where is my parcel")
    assert first.classification.route == "shipping" and first.model_calls == 0


def test_auto_offload_follows_the_measured_encode_time() -> None:
    clf = make(offload="auto", offload_above_ms=0.5)
    assert clf._should_offload() is False  # nothing measured yet
    clf._encode_ms = 3.0
    assert clf._should_offload() is True
    clf._encode_ms = 0.05
    assert clf._should_offload() is False


# -- the shipped support desk, with the real MiniLM encoder (embed extra) ------------------


@pytest.fixture(scope="module")
def desk() -> EmbeddingClassifier:
    pytest.importorskip("onnxruntime")
    from importlib import resources

    return EmbeddingClassifier.load(Path(str(resources.files("jeeves_router") / "data" / "desk_classifier.json")))


def test_shipped_desk_routes_in_scope_and_rejects_out_of_scope(desk: EmbeddingClassifier) -> None:
    assert desk.classify_text("I was charged twice").classification.route == "billing"
    assert desk.classify_text("my parcel has not arrived").classification.route == "shipping"
    assert not desk.classify_text("what's the weather in Lisbon").classification.ok


def test_shipped_desk_classifier_matches_its_route_file(desk: EmbeddingClassifier) -> None:
    from importlib import resources

    from jeeves_router.eval import load_routes

    routes = load_routes(Path(str(resources.files("jeeves_router") / "data" / "desk_routes.json")))
    assert desk.routes == routes


class SentenceOnly:
    """An encoder without token vectors (not a TokenEncoder), counting its calls."""

    def __init__(self) -> None:
        self.inner = HashingEncoder()
        self.name, self.dim = self.inner.name, self.inner.dim
        self.calls = 0

    def encode(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        return self.inner.encode(texts)


def test_a_token_scorer_follows_the_encoder_it_has_now() -> None:
    # whether the encoder gives token vectors is remembered per encoder object, not once for all
    clf = make(scorer="late")
    tokens = clf.classify_text("I was charged twice")
    sentence_only = SentenceOnly()
    clf.encoder = sentence_only  # type: ignore[assignment]
    plain = clf.classify_text("I was charged twice")
    assert sentence_only.calls == 1
    assert plain.classification.route == tokens.classification.route == "billing"
    assert plain.scores != tokens.scores  # whole-sentence tokens score differently from word tokens
