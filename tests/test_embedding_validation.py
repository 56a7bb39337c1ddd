"""One route-table rule for Router, route files and EmbeddingClassifier (ids.validate_route_names)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from jeeves_router import Agent, Router, RouterRoute
from jeeves_router.classify.embedding import EmbeddingClassifier, HashingEncoder
from jeeves_router.classify.types import RouteSpec
from jeeves_router.errors import UsageError
from jeeves_router.eval import DataFileError, load_routes
from jeeves_router.ids import route_name_key, validate_route_names
from jeeves_router.testing import ScriptedModel

BAD_TABLES = [
    (["billing", "Billing"], ["'billing' = 'Billing'"]),
    (["tech-support", "tech_support", "shipping"], ["'tech-support' = 'tech_support'"]),
    (["a", "A", "b-c", "B_C"], ["'a' = 'A'", "'b-c' = 'B_C'"]),
    (["billing", "bad name!", "x__y"], ["'bad name!'", "'x__y'"]),
]


def test_key_is_case_and_separator_blind() -> None:
    assert route_name_key("Tech_Support") == route_name_key("tech-support") == "tech-support"
    assert validate_route_names(["billing", "tech-support"]) == ("billing", "tech-support")


@pytest.mark.parametrize(("names", "named"), BAD_TABLES)
def test_the_rule_names_every_offender(names: list[str], named: list[str]) -> None:
    with pytest.raises(UsageError) as info:
        validate_route_names(names, owner="T")
    for piece in named:
        assert piece in str(info.value)


@pytest.mark.parametrize(("names", "named"), BAD_TABLES)
def test_route_files_use_the_rule(tmp_path: Path, names: list[str], named: list[str]) -> None:
    path = tmp_path / "routes.json"
    path.write_text(json.dumps([{"name": n, "examples": [f"example {i}"]} for i, n in enumerate(names)]))
    with pytest.raises(DataFileError) as info:
        load_routes(path)
    assert str(path) in str(info.value) and all(p in str(info.value) for p in named)


@pytest.mark.parametrize(("names", "named"), BAD_TABLES)
def test_embedding_classifier_uses_the_rule(names: list[str], named: list[str]) -> None:
    routes = [RouteSpec(n, f"route {i}", (f"example {i}",)) for i, n in enumerate(names)]
    with pytest.raises(UsageError) as info:
        EmbeddingClassifier(routes, encoder=HashingEncoder())
    assert "EmbeddingClassifier" in str(info.value) and all(p in str(info.value) for p in named)


@pytest.mark.parametrize(("names", "named"), BAD_TABLES)
def test_router_uses_the_rule(names: list[str], named: list[str]) -> None:
    agent = Agent("x", name="x", model=ScriptedModel(["ok"]))
    with pytest.raises(UsageError) as info:
        Router(routes=[RouterRoute(n, agent) for n in names])
    assert all(p in str(info.value) for p in named)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"offload_above_ms": "x"}, r"^offload_above_ms must be a number >= 0, got 'x'$"),
        ({"offload_above_ms": -1}, r"^offload_above_ms must be a number >= 0, got -1$"),
        ({"encoder": "minilm"}, r"^encoder must be an Encoder object, not the name 'minilm': pass e.g. MiniLMEnc"),
        ({"encoder": 3}, r"^encoder must be an Encoder .*, got int; pass e\.g\. MiniLMEncoder\(\)"),
        (
            {"max_scores": 0},
            r"^max_scores \(how many ranked routes .*; 1 for the best alone\) must be an integer >= 1, got 0$",
        ),
        ({"max_scores": "3"}, r"^max_scores .* must be an integer >= 1, got '3'$"),
    ],
)
def test_embedding_classifier_names_a_bad_encoder_offload_threshold_or_max_scores(
    kwargs: dict[str, object], match: str
) -> None:
    options: dict[str, object] = {"encoder": HashingEncoder(), **kwargs}
    with pytest.raises(UsageError, match=match):
        EmbeddingClassifier([RouteSpec("billing", "payments")], **options)  # type: ignore[arg-type]


def test_save_refuses_a_missing_folder_or_a_folder_as_fit_out_does(tmp_path: Path) -> None:
    clf = EmbeddingClassifier([RouteSpec("billing", "payments")], encoder=HashingEncoder())
    target = tmp_path / "no" / "clf.json"
    missing = re.escape(f"save({str(target)!r}): the folder {tmp_path / 'no'} does not exist; create it first")
    with pytest.raises(UsageError, match=f"^{missing}"):
        clf.save(target)
    with pytest.raises(UsageError, match=r"is a folder; name the file to write"):
        clf.save(tmp_path)
    assert not (tmp_path / "no").exists()
    clf.save(tmp_path / "clf.json")  # an existing folder is written as before
    assert EmbeddingClassifier.load(tmp_path / "clf.json", encoder=HashingEncoder()).route_names == ("billing",)
