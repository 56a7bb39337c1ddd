from __future__ import annotations

import importlib.util
import json
from importlib import resources
from pathlib import Path

import pytest
from typer.testing import CliRunner

pytest.importorskip("onnxruntime")  # the CLI routes with the default MiniLM encoder (embed extra)

from jeeves_router.cli import app

DATA = Path(str(resources.files("jeeves_router") / "data"))
runner = CliRunner()


def test_route_with_the_shipped_desk_works_offline() -> None:
    result = runner.invoke(app, ["route", "I was charged twice"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0].startswith("billing")


def test_route_json_and_out_of_scope() -> None:
    result = runner.invoke(app, ["route", "--json", "what is the capital of Peru"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["route"] is None and payload["status"] == "missing_route"
    assert set(payload["scores"]) == {"billing", "technical", "account", "shipping", "returns"}


def test_route_with_a_route_file_and_fit_on(tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        ["route", "--routes", str(DATA / "desk_routes.json"), "--fit-on", str(DATA / "desk_val.jsonl"), "--json",
         "where is my package"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["route"] == "shipping" and 0.0 < payload["threshold"] < 1.0


def test_fit_then_eval_with_outputs(tmp_path: Path) -> None:
    model = tmp_path / "desk.json"
    fitted = runner.invoke(app, ["fit", "--data", str(DATA / "desk_val.jsonl"), "--out", str(model), "-s", "logreg"])
    assert fitted.exit_code == 0, fitted.output
    assert json.loads(model.read_text())["scorer"]["kind"] == "logreg"
    out_csv, plots = tmp_path / "mis.csv", tmp_path / "plots"
    result = runner.invoke(
        app, ["eval", "--routes", str(model), "--data", str(DATA / "desk_test.jsonl"), "--out", str(out_csv),
              "--plots", str(plots)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "accuracy" in result.stdout and "out-of-scope recall" in result.stdout
    assert out_csv.read_text().startswith("line,text,expected,predicted,confidence")
    if importlib.util.find_spec("matplotlib") is not None:
        assert (plots / "confusion_matrix.png").is_file() and (plots / "reliability.png").is_file()


def test_eval_with_an_imported_classifier(tmp_path: Path) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text('{"text": "billing question", "route": "billing"}\n{"text": "hi", "route": "oos"}\n')
    result = runner.invoke(app, ["eval", "--data", str(data), "--classifier", "tests.test_cli:keyword_classifier"])
    assert result.exit_code == 0, result.output
    assert "1.000" in result.stdout


def keyword_classifier(routes: list[object]) -> object:
    from tests.test_eval import Keyword

    return Keyword()


def test_malformed_jsonl_exits_2_with_file_and_line(tmp_path: Path) -> None:
    data = tmp_path / "bad.jsonl"
    data.write_text('{"text": "a", "route": "billing"}\n{"text": "b", route}\n')
    result = runner.invoke(app, ["eval", "--data", str(data)])
    assert result.exit_code == 2
    assert f"{data}:2:" in result.stderr.replace("\n", "")


def test_unknown_route_in_data_exits_2_with_line(tmp_path: Path) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text('{"text": "a", "route": "billing"}\n{"text": "b", "route": "weather"}\n')
    result = runner.invoke(app, ["eval", "--data", str(data)])
    assert result.exit_code == 2
    err = result.stderr.replace("\n", "")
    assert f"{data}:2:" in err and "unknown route 'weather'" in err


def test_missing_files_exit_2(tmp_path: Path) -> None:
    result = runner.invoke(app, ["eval", "--data", str(tmp_path / "nope.jsonl")])
    assert result.exit_code == 2 and "file not found" in result.stderr
    result = runner.invoke(app, ["route", "--routes", str(tmp_path / "nope.json"), "hello"])
    assert result.exit_code == 2 and "file not found" in result.stderr


def test_bad_classifier_name_and_threshold_exit_2() -> None:
    result = runner.invoke(app, ["eval", "--data", str(DATA / "desk_test.jsonl"), "--classifier", "svm"])
    assert result.exit_code == 2 and "svm" in result.stderr
    result = runner.invoke(app, ["route", "--threshold", "3", "hello"])
    assert result.exit_code == 2 and "threshold" in result.stderr


def test_demo_runs() -> None:
    result = runner.invoke(app, ["demo"])
    assert result.exit_code == 0, result.output
    assert "billing" in result.stdout and "out of scope" in result.stdout


def test_fit_with_the_late_scorer_reads_negatives_from_the_route_file(tmp_path: Path) -> None:
    routes = json.loads((DATA / "desk_routes.json").read_text())
    negatives = ["what is the weather like in Lisbon", "recommend a good science fiction novel", "how tall is Everest"]
    route_file = tmp_path / "routes.json"
    route_file.write_text(json.dumps({"routes": routes, "negatives": negatives}))
    model = tmp_path / "late.json"
    fitted = runner.invoke(
        app,
        ["fit", "--routes", str(route_file), "--data", str(DATA / "desk_val.jsonl"), "--out", str(model), "-s", "late"],
    )
    assert fitted.exit_code == 0, fitted.output
    saved = json.loads(model.read_text())
    assert saved["scorer"]["kind"] == "late" and saved["negatives"] == negatives
    routed = runner.invoke(app, ["route", "--routes", str(model), "--json", "my parcel never arrived"])
    assert routed.exit_code == 0, routed.output
    assert json.loads(routed.stdout)["route"] == "shipping"


def test_malformed_negatives_exit_2_naming_the_file(tmp_path: Path) -> None:
    route_file = tmp_path / "routes.json"
    route_file.write_text(json.dumps({"routes": [{"name": "billing", "examples": ["refund"]}], "negatives": "oops"}))
    result = runner.invoke(app, ["route", "--routes", str(route_file), "-s", "late", "refund please"])
    assert result.exit_code == 2
    assert "routes.json" in result.output and "negatives" in result.output
