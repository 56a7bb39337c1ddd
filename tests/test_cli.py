from __future__ import annotations

import importlib.util
import json
import os
import re
import threading
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

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


def test_a_route_file_without_a_scorer_builds_the_default_late_scorer(tmp_path: Path) -> None:
    model = tmp_path / "default.json"
    routes, val = str(DATA / "desk_routes.json"), str(DATA / "desk_val.jsonl")
    fitted = runner.invoke(app, ["fit", "--routes", routes, "--data", val, "--out", str(model)])
    assert fitted.exit_code == 0, fitted.output
    scorer = json.loads(model.read_text())["scorer"]
    assert scorer["kind"] == "late" and scorer["lexical_weight"] > 0 and scorer["lexical"] is not None


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


# -- issue 18: loud calibration and CLI hygiene ---------------------------------------------------


def one_line_error(result: Result) -> str:
    """The stderr of a failed command, checked to be a single ``error:`` line with exit code 2."""
    assert result.exit_code == 2, result.output
    progress = re.compile(r"\d+/\d+ \d+:\d\d:\d\d$")
    lines = [line for line in result.stderr.splitlines() if line.strip() and not progress.search(line)]
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert "Traceback" not in result.output
    return str(lines[0])


def test_an_uncalibrated_route_file_routes_with_a_warning() -> None:
    result = runner.invoke(app, ["route", "--routes", str(DATA / "desk_routes.json"), "--json", "what's the weather"])
    assert result.exit_code == 0, result.output
    assert "not calibrated" in result.stderr and "no threshold" in result.stderr
    payload = json.loads(result.stdout)
    assert payload["calibrated"] is False and payload["threshold"] is None
    shipped = runner.invoke(app, ["route", "--json", "I was charged twice"])
    assert json.loads(shipped.stdout)["calibrated"] is True and "warning" not in shipped.stderr


def test_fit_without_oos_rows_says_so_and_prints_a_dash(tmp_path: Path) -> None:
    data = tmp_path / "in_scope.jsonl"
    data.write_text(
        "".join(ln + "\n" for ln in (DATA / "desk_val.jsonl").read_text().splitlines() if '"oos"' not in ln)
    )
    # centroid routes a few of these wrong (the late scorer none: a degenerate fit, refused)
    args = ["fit", "--data", str(data), "--scorer", "centroid", "--routes", str(DATA / "desk_routes.json")]
    result = runner.invoke(app, [*args, "--out", str(tmp_path / "m.json")])
    assert result.exit_code == 0, result.output
    assert "out-of-scope recall -" in result.stdout.replace("\n", " ")
    assert "not tuned to reject out-of-scope" in result.stderr.replace("\n", " ")


def test_fit_on_the_routes_own_examples_is_refused(tmp_path: Path) -> None:
    routes = json.loads((DATA / "desk_routes.json").read_text())
    data = tmp_path / "own.jsonl"
    data.write_text("".join(json.dumps({"text": e, "route": r["name"]}) + "\n" for r in routes for e in r["examples"]))
    msg = one_line_error(runner.invoke(app, ["fit", "--data", str(data), "--out", str(tmp_path / "m.json")]))
    assert "own examples" in msg and "held-out" in msg
    assert not (tmp_path / "m.json").exists()


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--objective", "precision", "--target-precision", "7"], "--target-precision"),
        (["--target-precision", "0"], "--target-precision"),
        (["--calibration", "sigmoid"], "--calibration"),
        (["--objective", "recall"], "--objective"),
        (["--max-misroute", "1.5"], "--max-misroute"),
        (["--max-misroute", "0.02", "--risk-confidence", "1"], "--risk-confidence"),
        (["--max-misroute", "0.02", "--oos-share", "1"], "--oos-share"),
        (["--oos-share", "0.2"], "--oos-share"),
        (["--scorer", "svm"], "--scorer"),
    ],
)
def test_fit_options_are_validated_in_one_line(tmp_path: Path, args: list[str], named: str) -> None:
    result = runner.invoke(
        app, ["fit", "--data", str(DATA / "desk_val.jsonl"), "--out", str(tmp_path / "m.json"), *args]
    )
    assert named in one_line_error(result)
    assert not (tmp_path / "m.json").exists()


def test_a_failing_imported_classifier_is_one_line_not_an_exception_group() -> None:
    data = str(DATA / "desk_test.jsonl")
    llm = runner.invoke(app, ["eval", "--data", data, "--classifier", "jeeves_router.classify:LLMClassifier"])
    assert "LLMClassifier" in one_line_error(llm)
    broken = runner.invoke(app, ["eval", "--data", data, "--classifier", "tests.test_cli:broken_classifier"])
    msg = one_line_error(broken)
    assert "failed on line" in msg and "RuntimeError: no model here" in msg


class _Broken:
    async def classify(self, request: object) -> object:
        raise RuntimeError("no model here")


def broken_classifier(routes: list[object]) -> object:
    return _Broken()


def test_route_dash_reads_stdin_and_data_reads_jsonl(tmp_path: Path) -> None:
    piped = runner.invoke(app, ["route", "-"], input="I was charged twice\n\nmy parcel never arrived\n")
    assert piped.exit_code == 0, piped.output
    assert [line.split("\t")[0] for line in piped.stdout.splitlines()] == ["billing", "shipping"]
    assert "routing" in piped.stderr and "2/2" in piped.stderr  # the progress bar
    assert "stdin" in one_line_error(runner.invoke(app, ["route", "-"], input="\n"))
    rows = tmp_path / "requests.jsonl"
    rows.write_text('{"text": "I was charged twice"}\n"what is the capital of Peru"\n')
    batch = runner.invoke(app, ["route", "--data", str(rows), "--json"])
    assert batch.exit_code == 0, batch.output
    decided = [json.loads(line) for line in batch.stdout.splitlines()]
    assert [(d["line"], d["route"]) for d in decided] == [(1, "billing"), (2, None)]
    assert "both" not in one_line_error(runner.invoke(app, ["route", "--data", str(rows), "hello"]))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"txt": 1}\n')
    assert f"{bad}:1:" in one_line_error(runner.invoke(app, ["route", "--data", str(bad)]))


def test_data_dash_reads_jsonl_from_stdin_and_json_numbers_are_rounded() -> None:
    rows = '{"text": "I was charged twice"}\n"what is the capital of Peru"\n'
    batch = runner.invoke(app, ["route", "--data", "-", "--json"], input=rows)
    assert batch.exit_code == 0, batch.output
    decided = [json.loads(line) for line in batch.stdout.splitlines()]
    assert [(d["line"], d["route"]) for d in decided] == [(1, "billing"), (2, None)]
    billing = decided[0]
    assert billing["margin"] == round(billing["margin"], 6)
    assert billing["margin"] == round(billing["confidence"] - billing["scores"][billing["runner_up"]], 6)
    labelled = (DATA / "desk_test.jsonl").read_text()
    from_stdin = runner.invoke(app, ["eval", "--data", "-"], input=labelled)
    from_file = runner.invoke(app, ["eval", "--data", str(DATA / "desk_test.jsonl")])
    assert from_stdin.exit_code == 0, from_stdin.output
    assert from_stdin.stdout == from_file.stdout


def test_an_empty_request_is_out_of_scope_with_no_empty_score_table() -> None:
    shown = runner.invoke(app, ["route", "  "])
    assert shown.exit_code == 0, shown.output
    assert shown.stdout.splitlines() == ["no route (out of scope): empty"]


def test_scorer_options_without_a_route_file_are_refused() -> None:
    assert "--routes" in one_line_error(runner.invoke(app, ["route", "-s", "late", "hello"]))
    data = str(DATA / "desk_test.jsonl")
    assert "--routes" in one_line_error(runner.invoke(app, ["eval", "--data", data, "--classifier", "logreg"]))


def test_oos_label_is_honoured_by_fit_and_fit_on(tmp_path: Path) -> None:
    data = tmp_path / "val.jsonl"
    data.write_text((DATA / "desk_val.jsonl").read_text().replace('"route": "oos"', '"route": "none"'))
    plain = runner.invoke(app, ["fit", "--data", str(data), "--out", str(tmp_path / "m.json")])
    assert "unknown route 'none'" in one_line_error(plain)
    fitted = runner.invoke(app, ["fit", "--data", str(data), "--out", str(tmp_path / "m.json"), "--oos-label", "none"])
    assert fitted.exit_code == 0, fitted.output
    assert "out-of-scope recall -" not in fitted.stdout.replace("\n", " ")
    routed = runner.invoke(
        app,
        ["route", "--routes", str(DATA / "desk_routes.json"), "--fit-on", str(data), "--oos-label", "none", "--json",
         "what is the capital of Peru"],
    )  # fmt: skip
    assert routed.exit_code == 0, routed.output
    assert json.loads(routed.stdout)["route"] is None


def desk_embedded(routes: list[object]) -> object:
    from jeeves_router.classify.embedding import EmbeddingClassifier

    return EmbeddingClassifier.load(DATA / "desk_classifier.json")


def test_fit_certifies_the_threshold_of_any_classifier(tmp_path: Path) -> None:
    saved = tmp_path / "risk.json"
    args = ["fit", "--data", str(DATA / "desk_test.jsonl"), "--classifier", "tests.test_cli:desk_embedded"]
    result = runner.invoke(app, [*args, "--max-misroute", "0.2", "--risk-confidence", "0.8", "--out", str(saved)])
    assert result.exit_code == 0, result.output
    assert "require_confidence_above=" in result.stdout
    risk = json.loads(saved.read_text())["risk"]
    assert risk["certified"] and risk["upper_bound"] <= 0.2 and 0.0 < risk["coverage"] <= 1.0
    assert "--max-misroute" in one_line_error(runner.invoke(app, args))


def test_fit_certifies_for_a_stated_out_of_scope_share(tmp_path: Path) -> None:
    saved = tmp_path / "risk.json"
    args = ["fit", "--data", str(DATA / "desk_test.jsonl"), "--classifier", "tests.test_cli:desk_embedded"]
    result = runner.invoke(
        app, [*args, "--max-misroute", "0.2", "--risk-confidence", "0.8", "--oos-share", "0.2", "--out", str(saved)]
    )
    assert result.exit_code == 0, result.output
    assert "for up to 20% out-of-scope traffic" in result.stdout
    risk = json.loads(saved.read_text())["risk"]
    assert risk["certified"] and risk["oos_share"] == 0.2 and risk["upper_bound"] <= 0.2


def test_eval_reports_coverage_and_misroute_among_auto_routed() -> None:
    result = runner.invoke(app, ["eval", "--data", str(DATA / "desk_test.jsonl")])
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert "coverage (auto-routed)" in text and "misroute among auto-routed" in text
    assert re.search(r"risk-coverage \(misroute at coverage\): \d+% 0\.\d{4}", text)


def test_the_shipped_desk_encodes_one_request_on_its_thread_and_a_batch_on_two(monkeypatch: pytest.MonkeyPatch) -> None:
    from jeeves_router.classify.embedding import MiniLMEncoder, encoders
    from jeeves_router.cli._embed import load_embedding

    monkeypatch.setattr(encoders, "_DEFAULT", [])  # a fresh shared encoder, as in a new process
    clf = load_embedding(None, None, None, None, one_request=True, typed=str)
    enc = clf.encoder
    assert isinstance(enc, MiniLMEncoder) and enc.quantized
    assert enc._session.get_session_options().intra_op_num_threads == 1  # one session, one thread per call
    seen: list[tuple[int, int]] = []
    encode_batch = enc._encode_batch

    def spy(ids: list[list[int]], tokens: bool) -> Any:
        seen.append((threading.get_ident(), len(ids)))
        return encode_batch(ids, tokens)

    monkeypatch.setattr(enc, "_encode_batch", spy)
    one = clf.classify_text("I was charged twice")
    assert seen == [(threading.get_ident(), 1)]  # one request: on the calling thread, no thread started
    seen.clear()
    texts = ["I was charged twice", "my parcel never arrived", *(f"where is order {i}" for i in range(38))]
    batch = clf.classify_batch(texts)
    workers = min(2, os.cpu_count() or 1)
    assert len({ident for ident, _ in seen}) == workers  # the chunks are shared between the workers
    assert sum(n for _, n in seen) == len(texts) and max(n for _, n in seen) <= enc.batch_size
    assert threading.active_count() == 1 or all(t.name != "jeeves-encode" for t in threading.enumerate())
    assert batch[0].scores == one.scores  # the same vectors in any chunk, on any thread


def _readme_mpnet_options() -> dict[str, float]:
    """The ``scorer_options`` of the README's MPNet example."""
    import ast

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    found = re.search(r"encoder=MPNetEncoder\(\), scorer_options=(\{[^}]*\})", readme)
    assert found is not None, "the README's MPNet example with its scorer_options"
    options: dict[str, float] = ast.literal_eval(found.group(1))
    return options


@pytest.mark.parametrize("encoder", ["mpnet", "minilm"])
def test_the_cli_builds_mpnet_with_the_late_options_the_readme_states(
    encoder: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jeeves_router.classify.embedding import HashingEncoder
    from jeeves_router.classify.embedding.late import LateInteractionScorer
    from jeeves_router.cli import _embed as cli_embed

    made: list[str] = []

    def cheap(name: cli_embed.EncoderName) -> HashingEncoder:  # the options, not the real encoder, are tested
        made.append(name.value)
        return HashingEncoder()

    monkeypatch.setattr(cli_embed, "make_encoder", cheap)
    model = tmp_path / "fitted.json"
    routes, val = str(DATA / "desk_routes.json"), str(DATA / "desk_val.jsonl")
    fitted = runner.invoke(app, ["fit", "--routes", routes, "--encoder", encoder, "--data", val, "--out", str(model)])
    assert fitted.exit_code == 0, fitted.output
    assert made == [encoder]
    scorer = json.loads(model.read_text())["scorer"]
    expected = _readme_mpnet_options() if encoder == "mpnet" else {"token_weight": LateInteractionScorer().token_weight}
    assert scorer["kind"] == "late" and {k: scorer[k] for k in expected} == expected
    assert expected["token_weight"] == (5.0 if encoder == "mpnet" else 8.0)
