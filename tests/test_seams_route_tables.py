"""Seams of the route-table features: the out-of-scope label, eval's auto-routed figures, saved files.

Each test here failed before the fix it names.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import ClassVar

import pytest

from jeeves_router.classify.embedding import EmbeddingClassifier, HashingEncoder
from jeeves_router.classify.types import Classification, ClassifyRequest, ClassifyResult, RouteSpec
from jeeves_router.errors import UsageError
from jeeves_router.eval import EvaluationError, LabelledRow, Prediction, check_labels, evaluate, predict
from tests.test_embedding_classifier import VAL
from tests.test_eval import Keyword

OOS_ROUTES = (
    RouteSpec("billing", "payments invoices refunds", ("I was charged twice", "refund my payment")),
    RouteSpec("OOS", "anything else", ("weather today", "tell me a joke")),
)


def test_check_labels_refuses_a_route_named_like_the_oos_label() -> None:
    # Rows labelled "oos" would count as out of scope while the classifier routes them to "OOS".
    rows = [LabelledRow("weather", "oos", 1)]
    with pytest.raises(UsageError, match="route 'OOS' has the name of the out-of-scope label 'oos'"):
        check_labels(rows, ["billing", "OOS"], oos_label="oos", path="d.jsonl")
    check_labels([LabelledRow("weather", "OOS", 1)], ["billing", "OOS"], oos_label="none", path="d.jsonl")


def test_fit_refuses_a_route_named_like_the_oos_label() -> None:
    clf = EmbeddingClassifier(OOS_ROUTES, encoder=HashingEncoder())
    texts = [t for t, _ in VAL]
    labels = ["billing" if lab == "billing" else "oos" for _, lab in VAL]
    with pytest.raises(UsageError, match="name of the out-of-scope label"):
        clf.fit(texts, labels)
    assert clf.calibrator is None and clf.threshold is None


@pytest.mark.anyio
async def test_evaluate_refuses_a_route_named_like_the_oos_label() -> None:
    # Keyword answers the declared route "OOS", which the report would have counted as a rejection.
    rows = [LabelledRow("about billing", "billing", 1), LabelledRow("OOS thing", "oos", 2)]
    with pytest.raises(UsageError, match="name of the out-of-scope label"):
        await evaluate(Keyword(), OOS_ROUTES, rows)


class Undispatchable:
    """A custom classifier whose answers a Router would never dispatch, one kind per row."""

    ANSWERS: ClassVar[dict[str, tuple[str, float]]] = {
        "nan": ("billing", float("nan")),
        "big": ("billing", 1.5),
        "case": ("Billing", 0.9),
        "invented": ("nowhere", 0.9),
        "good": ("billing", 0.8),
    }

    async def classify(self, request: ClassifyRequest) -> ClassifyResult:
        route, conf = self.ANSWERS[request.text]
        return ClassifyResult(Classification(route, conf, "ok", request.text), stage="custom")


@pytest.mark.anyio
async def test_eval_counts_undispatchable_answers_as_rejections() -> None:
    # Before: all five rows counted as auto-routed (coverage 1.0) and NaN sat in the ECE and the curve.
    texts = ["nan", "big", "case", "invented", "good"]
    rows = [LabelledRow(t, "billing", i) for i, t in enumerate(texts, 1)]
    report = await evaluate(Undispatchable(), OOS_ROUTES[:1], rows)
    assert report.coverage == pytest.approx(1 / 5)
    assert report.misroute == 0.0 and report.in_scope_accuracy == pytest.approx(1 / 5)
    assert math.isfinite(report.ece) and all(math.isfinite(r) for _, r in report.risk_coverage)
    assert {m.predicted for m in report.misrouted} == {"oos"}
    preds = await predict(Undispatchable(), OOS_ROUTES[:1], rows)
    assert [(p.route, p.top_route, p.top_confidence) for p in preds] == [(None, None, 0.0)] * 4 + [
        ("billing", "billing", 0.8)
    ]


class ShortBatch:
    """A batching classifier that drops the last text of every batch."""

    def classify_batch(self, texts: list[str], names: list[str]) -> list[ClassifyResult]:
        return [ClassifyResult(Classification("billing", 0.9, "ok", t)) for t in texts[:-1]]

    async def classify(self, request: ClassifyRequest) -> ClassifyResult:  # pragma: no cover - not called
        raise AssertionError


@pytest.mark.anyio
async def test_a_batch_with_missing_results_is_an_evaluation_error() -> None:
    # Before: the results list shrank and the rows were scored against shifted predictions.
    rows = [LabelledRow(f"t{i}", "billing", i) for i in range(1, 4)]
    with pytest.raises(EvaluationError, match="returned 2 results for 3 texts"):
        await predict(ShortBatch(), OOS_ROUTES[:1], rows)


def test_eval_prints_each_risk_coverage_point_once() -> None:
    # Ties put one third of the rows at the top and the rest in one step: before, "100%" was printed four times.
    from rich.console import Console

    from jeeves_router.cli._show import eval_report
    from jeeves_router.eval import compute_report

    rows = [LabelledRow(f"t{i}", "billing", i) for i in range(1, 7)]
    preds = [Prediction("billing", "billing", 0.9)] * 2 + [Prediction("billing", "billing", 0.3)] * 4
    console = Console(record=True, width=200)
    eval_report(console, compute_report(rows, preds))
    line = next(x for x in console.export_text().splitlines() if x.startswith("risk-coverage"))
    assert line == "risk-coverage (misroute at coverage): 33% 0.0000, 100% 0.0000"


def undispatchable(routes: list[RouteSpec]) -> Undispatchable:
    return Undispatchable()


def test_fit_certify_says_when_the_classifier_gave_no_usable_answer(tmp_path: Path) -> None:
    # A classifier answering NaN: before, "scores must be finite"; now the rows are rejections
    # and the one-line refusal says how many answers could not be dispatched.
    from typer.testing import CliRunner

    from jeeves_router.cli import app

    routes, data = tmp_path / "r.json", tmp_path / "d.jsonl"
    routes.write_text(json.dumps([{"name": "billing", "examples": ["refund"]}]))
    data.write_text("".join(json.dumps({"text": t, "route": "billing"}) + "\n" for t in ["nan", "invented"] * 6))
    args = ["fit", "--classifier", "tests.test_seams_route_tables:undispatchable", "--routes", str(routes)]
    result = CliRunner().invoke(app, [*args, "--data", str(data), "--max-misroute", "0.1"])
    assert result.exit_code == 2
    message = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert message == [
        "error: no threshold keeps misroutes at or below 0.1 with confidence 0.95 on these 12 rows (12 of them got "
        "no declared route with a confidence in [0, 1] from the classifier); allow more misroutes or add labelled rows"
    ]


@pytest.mark.parametrize("scorer", ["centroid", "nearest", "logreg", "late"])
@pytest.mark.parametrize("edit", ["remove", "add"])
def test_a_saved_classifier_with_routes_added_or_removed_by_hand_is_refused_on_load(scorer: str, edit: str) -> None:
    # Before: with a route removed, classify failed with an IndexError; with one added, the new route
    # was silently never chosen (the desk sent "what's the weather today" to technical at 0.89).
    from tests.test_embedding_classifier import ROUTES

    data = EmbeddingClassifier(ROUTES, encoder=HashingEncoder(), scorer=scorer).to_dict()
    if edit == "remove":
        del data["routes"][0]
    else:
        data["routes"].append({"name": "returns", "description": "send it back", "examples": ["return my order"]})
    with pytest.raises(UsageError, match=r"edited.json: its scorer was fitted on 3 routes but it lists [24]"):
        EmbeddingClassifier.from_dict(data, encoder=HashingEncoder(), source="edited.json")


@pytest.mark.parametrize("names", [["billing", "technical", "shipping"], ["Billing", "technical"]])
@pytest.mark.parametrize("cascade", [False, True])
def test_a_router_refuses_an_embedded_classifier_that_lacks_some_of_its_routes(names: list[str], cascade: bool) -> None:
    # Before: "where is my parcel" went to billing, status ok (shipping unknown to the classifier),
    # and a route spelled "Billing" was never chosen.
    from jeeves_router import Agent, Router, RouterRoute
    from jeeves_router.classify.cascade import CascadeClassifier
    from jeeves_router.testing import ScriptedModel, StaticClassifier
    from tests.test_embedding_classifier import ROUTES

    embedded = EmbeddingClassifier(ROUTES[:2], encoder=HashingEncoder())
    classifier = CascadeClassifier(embedded, StaticClassifier("technical")) if cascade else embedded
    routes = [RouterRoute(n, Agent("x", name=f"a{i}", model=ScriptedModel([]))) for i, n in enumerate(names)]
    missing = names[2] if len(names) == 3 else names[0]
    with pytest.raises(UsageError, match=f"Router: its classifier EmbeddingClassifier knows the routes billing, "
                                         f"technical, not '{missing}'"):  # fmt: skip
        Router(routes=routes, classifier=classifier)
    Router(routes=routes[1:2], classifier=classifier)  # a subset of what it knows is fine


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("ranked", "offered"),
    [
        ((("returns", 0.99), ("billing", 0.01)), ("billing", "technical")),  # a route not declared
        ((("technical", 0.99), ("billing", 0.01)), ("billing",)),  # excluded for a reclassification
        ((("billing", 1.5), ("technical", 0.01)), ("billing", "technical")),  # a confidence above 1
    ],
)
async def test_a_cascade_asks_its_second_stage_when_the_first_answers_something_undispatchable(
    ranked: tuple[tuple[str, float], ...], offered: tuple[str, ...]
) -> None:
    # Before: the first stage's answer was returned as decided, and the Router fell back
    # (unknown_route, excluded_route, invalid_confidence) without asking the second stage.
    from jeeves_router.classify.cascade import CascadeClassifier
    from tests.test_cascade import FakeLLM, FixedFirst

    llm = FakeLLM("billing")
    cascade = CascadeClassifier(FixedFirst(ranked), llm, accept_above=0.8)
    result = await cascade.classify(ClassifyRequest("hello", tuple(RouteSpec(n) for n in offered)))
    assert len(llm.seen) == 1 and result.stage == "cascade:llm"
    assert result.classification.route == "billing" and cascade.stats.first == 0


def test_a_saved_classifier_with_a_bad_route_table_is_refused_naming_the_file() -> None:
    # Before: "EmbeddingClassifier: duplicate route names ..." without the file; now the
    # message a route file with the same names gets.
    from tests.test_embedding_classifier import ROUTES

    data = EmbeddingClassifier(ROUTES, encoder=HashingEncoder()).to_dict()
    data["routes"][1]["name"] = "BILLING"
    with pytest.raises(UsageError, match=r"^edited.json: duplicate route names 'billing' = 'BILLING' \(names"):
        EmbeddingClassifier.from_dict(data, encoder=HashingEncoder(), source="edited.json")


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--out", "bad.txt", "--out {p}/bad.txt: must end in .csv or .json"),
        ("--out", "", "--out {p}: is a folder; name the file to write"),
        ("--out", "nodir/m.csv", "--out {p}/nodir/m.csv: the folder {p}/nodir does not exist"),
        ("--plots", "d.jsonl", "--plots {p}/d.jsonl: a file is there, not a folder"),
    ],
)
def test_eval_refuses_an_output_it_cannot_write_before_classifying(
    tmp_path: Path, option: str, value: str, message: str
) -> None:
    # Before: every row was classified (an LLM classifier's calls paid for) and the report
    # printed, then the write failed.
    from typer.testing import CliRunner

    from jeeves_router.cli import app

    routes, data = tmp_path / "r.json", tmp_path / "d.jsonl"
    routes.write_text(json.dumps([{"name": "billing", "examples": ["refund"]}]))
    data.write_text(json.dumps({"text": "good", "route": "billing"}) + "\n")
    target = str(tmp_path / value) if value else str(tmp_path)
    args = ["eval", "--classifier", "tests.test_seams_route_tables:undispatchable", "--routes", str(routes)]
    result = CliRunner().invoke(app, [*args, "--data", str(data), option, target])
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.splitlines() == ["error: " + message.format(p=tmp_path)]


def test_fit_refuses_an_out_path_it_cannot_write_before_fitting(tmp_path: Path) -> None:
    # Before: the classifier was fitted, then "IsADirectoryError: ... .x.abc.tmp -> ..." (or a
    # FileNotFoundError for a missing folder).
    pytest.importorskip("onnxruntime")
    from importlib import resources

    from typer.testing import CliRunner

    from jeeves_router.cli import app

    data = str(resources.files("jeeves_router") / "data" / "desk_val.jsonl")
    cases = [
        (tmp_path, f"--out {tmp_path}: is a folder; name the file to write"),
        (tmp_path / "no" / "x.json", f"--out {tmp_path}/no/x.json: the folder {tmp_path}/no does not exist"),
    ]
    for out, message in cases:
        result = CliRunner().invoke(app, ["fit", "--data", data, "--out", str(out)])
        assert result.exit_code == 2 and result.stdout == ""
        assert result.stderr.splitlines() == [f"error: {message}"]
