from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from jeeves_router.classify.cascade import CascadeClassifier
from jeeves_router.classify.types import Classification, ClassifyRequest, ClassifyResult, RouteSpec
from jeeves_router.errors import UsageError
from jeeves_router.eval import (
    DataFileError,
    LabelledRow,
    Prediction,
    check_labels,
    compute_report,
    evaluate,
    load_labelled,
    load_routes,
    risk_coverage_curve,
    write_misrouted,
    write_plots,
)


def rows(*labels: str) -> list[LabelledRow]:
    return [LabelledRow(f"text {i}", lab, i + 1) for i, lab in enumerate(labels)]


def test_metrics_on_a_hand_checked_example() -> None:
    data = rows("a", "a", "b", "b", "oos", "oos")
    preds = [
        Prediction("a", "a", 0.9),
        Prediction("b", "b", 0.8),  # wrong: a -> b
        Prediction("b", "b", 0.7),
        Prediction(None, "b", 0.3),  # rejected in-scope row
        Prediction(None, "a", 0.2),
        Prediction("a", "a", 0.6),  # OOS accepted as a
    ]
    r = compute_report(data, preds)
    assert r.rows == 6
    assert r.accuracy == pytest.approx(3 / 6)
    assert r.in_scope_accuracy == pytest.approx(2 / 4)
    assert r.oos_recall == pytest.approx(1 / 2)
    assert r.oos_precision == pytest.approx(1 / 2)
    assert r.labels == ("a", "b", "oos")
    assert r.confusion == ((1, 1, 0), (0, 1, 1), (1, 0, 1))
    f1_a, f1_b, f1_oos = 2 / (2 + 1 + 1), 2 / (2 + 1 + 1), 2 / (2 + 1 + 1)
    assert r.macro_f1 == pytest.approx((f1_a + f1_b + f1_oos) / 3)
    assert [m.line for m in r.misrouted] == [2, 4, 6]
    assert r.misrouted[0].expected == "a" and r.misrouted[0].predicted == "b"


def test_ece_is_zero_when_confidence_matches_accuracy_and_large_when_not() -> None:
    data = rows("a", "a", "a", "a")
    honest = [Prediction("a", "a", 0.75)] * 3 + [Prediction("b", "b", 0.75)]
    assert compute_report(data, honest).ece == pytest.approx(0.0)
    overconfident = [Prediction("b", "b", 0.95)] * 4
    assert compute_report(data, overconfident).ece == pytest.approx(0.95)


def test_report_without_oos_rows() -> None:
    r = compute_report(rows("a", "b"), [Prediction("a", "a", 0.9), Prediction("b", "b", 0.9)])
    assert r.oos_recall is None and r.accuracy == 1.0 and r.misrouted == ()


def test_compute_report_needs_matching_lengths() -> None:
    with pytest.raises(UsageError):
        compute_report(rows("a"), [])


def test_load_labelled_reports_file_and_line(tmp_path: Path) -> None:
    p = tmp_path / "d.jsonl"
    p.write_text('{"text": "a", "route": "x"}\n\n{"text": "b", route: "y"}\n')
    with pytest.raises(DataFileError) as info:
        load_labelled(p)
    assert info.value.line == 3 and str(p) in str(info.value) and f"{p}:3:" in str(info.value)
    p.write_text('{"text": "a", "route": "x"}\n["not", "an", "object"]\n')
    with pytest.raises(DataFileError, match=r":2: expected a JSON object"):
        load_labelled(p)
    p.write_text('{"text": "a", "route": 3}\n')
    with pytest.raises(DataFileError, match=r":1: 'text' and 'route' must both be strings"):
        load_labelled(p)
    p.write_text("\n\n")
    with pytest.raises(DataFileError, match="no rows"):
        load_labelled(p)
    with pytest.raises(DataFileError, match="file not found"):
        load_labelled(tmp_path / "missing.jsonl")


def test_a_file_that_is_not_utf8_is_refused_with_its_line_and_byte(tmp_path: Path) -> None:
    """A Latin-1 export is named as such (where, and what to do), for labelled data and route files alike."""
    data = tmp_path / "d.jsonl"
    data.write_bytes('{"text": "a", "route": "x"}\n{"text": "caf\u00e9", "route": "x"}\n'.encode("latin-1"))
    with pytest.raises(DataFileError) as info:
        load_labelled(data)
    assert str(info.value) == f"{data}:2: not UTF-8 text (byte 0xe9 at offset 41): save the file as UTF-8"
    routes = tmp_path / "r.json"
    routes.write_bytes(b"\xff\xfe[]")
    with pytest.raises(DataFileError, match=r"r\.json:1: not UTF-8 text \(byte 0xff at offset 0\): save the file as"):
        load_routes(routes)


def test_load_labelled_skips_blank_lines_and_keeps_line_numbers(tmp_path: Path) -> None:
    p = tmp_path / "d.jsonl"
    p.write_text('\n{"text": "a", "route": "x"}\n\n{"text": "b", "route": "oos"}\n')
    assert load_labelled(p) == [LabelledRow("a", "x", 2), LabelledRow("b", "oos", 4)]


def test_check_labels_names_the_line_of_an_unknown_route(tmp_path: Path) -> None:
    with pytest.raises(DataFileError, match=r"d.jsonl:7: unknown route 'weather'"):
        check_labels([LabelledRow("t", "billing", 3), LabelledRow("t", "weather", 7)], ["billing"], oos_label="oos",
                     path=tmp_path / "d.jsonl")  # fmt: skip
    check_labels([LabelledRow("t", "oos", 1)], ["billing"], oos_label="oos", path="x")


def test_load_routes_formats_and_errors(tmp_path: Path) -> None:
    p = tmp_path / "r.json"
    p.write_text(json.dumps([{"name": "a", "description": "d", "examples": ["x"]}, {"name": "b"}]))
    assert load_routes(p) == (RouteSpec("a", "d", ("x",)), RouteSpec("b"))
    p.write_text(json.dumps({"routes": [{"name": "a", "utterances": ["u"]}]}))
    assert load_routes(p) == (RouteSpec("a", "", ("u",)),)
    p.write_text('[\n{"name": "a"},\n{"name": }\n]')
    with pytest.raises(DataFileError, match=r"r.json:3: invalid JSON"):
        load_routes(p)
    p.write_text(json.dumps([{"name": "a"}, {"name": "a"}]))
    with pytest.raises(DataFileError, match="duplicate"):
        load_routes(p)
    p.write_text(json.dumps([{"description": "no name"}]))
    with pytest.raises(DataFileError, match="route #1"):
        load_routes(p)
    p.write_text(json.dumps([{"name": "a", "examples": "not a list"}]))
    with pytest.raises(DataFileError, match="examples"):
        load_routes(p)


def test_shipped_desk_data_is_consistent() -> None:
    from importlib import resources

    base = Path(str(resources.files("jeeves_router") / "data"))
    routes = load_routes(base / "desk_routes.json")
    names = [r.name for r in routes]
    assert len(routes) >= 4 and all(len(r.examples) >= 15 for r in routes)
    for split in ("desk_val.jsonl", "desk_test.jsonl"):
        data = load_labelled(base / split)
        check_labels(data, names, oos_label="oos", path=split)
        assert sum(r.label == "oos" for r in data) >= 15
    val = {r.text for r in load_labelled(base / "desk_val.jsonl")}
    test = {r.text for r in load_labelled(base / "desk_test.jsonl")}
    examples = {e for r in routes for e in r.examples}
    assert not (val & test) and not (val & examples) and not (test & examples)


class Keyword:
    """A protocol-only classifier: picks the route whose name appears in the text."""

    async def classify(self, request: ClassifyRequest) -> ClassifyResult:
        for r in request.routes:
            if r.name in request.text:
                return ClassifyResult(Classification(r.name, 0.9, "ok", r.name))
        return ClassifyResult(Classification(None, 0.0, "missing_route", ""))


@pytest.mark.anyio
async def test_evaluate_any_classifier_with_progress() -> None:
    data = [LabelledRow("about billing", "billing", 1), LabelledRow("a shipping thing", "shipping", 2),
            LabelledRow("weather", "oos", 3), LabelledRow("billing for shipping", "shipping", 4)]  # fmt: skip
    seen: list[int] = []
    r = await evaluate(Keyword(), (RouteSpec("billing"), RouteSpec("shipping")), data, on_progress=seen.append)
    assert sum(seen) == 4
    assert r.accuracy == pytest.approx(3 / 4) and r.oos_recall == 1.0
    assert [m.line for m in r.misrouted] == [4]


@pytest.mark.anyio
async def test_evaluate_uses_batching_when_available() -> None:
    from jeeves_router.classify.embedding import EmbeddingClassifier, HashingEncoder

    routes = (RouteSpec("billing", "", ("refund my payment",)), RouteSpec("shipping", "", ("where is my parcel",)))
    clf = EmbeddingClassifier(routes, encoder=HashingEncoder())
    data = [LabelledRow("refund payment", "billing", 1), LabelledRow("parcel where", "shipping", 2)]
    seen: list[int] = []
    r = await evaluate(clf, routes, data, on_progress=seen.append)
    assert r.accuracy == 1.0 and seen == [2]


def test_write_misrouted_csv_json_and_bad_suffix(tmp_path: Path) -> None:
    r = compute_report(rows("a", "oos"), [Prediction("b", "b", 0.6), Prediction(None, "a", 0.1)])
    write_misrouted(r, tmp_path / "m.csv")
    with (tmp_path / "m.csv").open() as fh:
        got = list(csv.DictReader(fh))
    assert got == [{"line": "1", "text": "text 0", "expected": "a", "predicted": "b", "confidence": "0.6"}]
    write_misrouted(r, tmp_path / "m.json")
    assert json.loads((tmp_path / "m.json").read_text())[0]["predicted"] == "b"
    with pytest.raises(UsageError, match=r"\.csv or \.json"):
        write_misrouted(r, tmp_path / "m.txt")


def test_write_plots(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    r = compute_report(
        rows("a", "b", "oos"), [Prediction("a", "a", 0.9), Prediction("a", "a", 0.6), Prediction(None, "b", 0.2)]
    )
    paths = write_plots(r, tmp_path / "plots")
    assert [p.name for p in paths] == ["confusion_matrix.png", "reliability.png", "risk_coverage.png"]
    assert all(p.read_bytes()[:4] == b"\x89PNG" for p in paths)


def test_coverage_misroute_and_the_risk_coverage_curve() -> None:
    data = rows("a", "a", "b", "b", "oos")
    preds = [
        Prediction("a", "a", 0.9),
        Prediction("b", "b", 0.8),  # misrouted
        Prediction("b", "b", 0.7),
        Prediction(None, "b", 0.3),  # rejected: not auto-routed
        Prediction("a", "a", 0.6),  # OOS given a route: misrouted
    ]
    r = compute_report(data, preds)
    assert r.coverage == pytest.approx(4 / 5)
    assert r.misroute == pytest.approx(2 / 4)
    curve = dict(r.risk_coverage)
    assert curve[0.2] == 0.0 and curve[0.4] == pytest.approx(1 / 2) and curve[0.6] == pytest.approx(1 / 3)
    assert curve[1.0] == pytest.approx(2 / 5)  # row 4's top route 'b' is right, so 3 of 5 right
    assert compute_report(rows("a"), [Prediction(None, "a", 0.1)]).misroute is None
    tied = risk_coverage_curve([0.5, 0.5, 0.5, 0.1], [True, False, True, True])
    assert tied[0] == (0.75, pytest.approx(1 / 3))  # ties are accepted together


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("given", "needle"),
    [
        (("billing",), r"'shipping' missing from the routes given \(never offered to it\)"),
        (("billing", "shipping", "returns"), r"'returns' missing from it \(it could never choose them\)"),
        (("billing", "returns"), r"'returns' missing from it .*; 'shipping' missing from the routes given"),
    ],
)
async def test_evaluate_and_predict_refuse_routes_other_than_a_fixed_classifier_table(
    given: tuple[str, ...], needle: str
) -> None:
    from jeeves_router.classify.embedding import EmbeddingClassifier, HashingEncoder
    from jeeves_router.eval import predict

    table = (RouteSpec("billing", "", ("refund my payment",)), RouteSpec("shipping", "", ("where is my parcel",)))
    clf = EmbeddingClassifier(table, encoder=HashingEncoder())
    data = [LabelledRow("refund payment", "billing", 1)]
    routes = [RouteSpec(n, "", ("an example",)) for n in given]
    match = rf"^evaluate: its classifier EmbeddingClassifier knows the routes billing, shipping, .*{needle}"
    with pytest.raises(UsageError, match=match):
        await evaluate(clf, routes, data)
    with pytest.raises(UsageError, match=match):
        await predict(clf, routes, data)
    with pytest.raises(UsageError, match=match):  # a cascade's fixed stage is checked too
        await evaluate(CascadeClassifier(clf, Keyword()), routes, data)
