"""Wrong input to a command is one ``error:`` line naming the option at fault and what to do, exit code 2."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest
from typer.testing import CliRunner

pytest.importorskip("onnxruntime")  # route, fit and eval build the embedded classifier

from jeeves_router.cli import app

DATA = Path(str(resources.files("jeeves_router") / "data"))
ROUTES = str(DATA / "desk_routes.json")
VAL = str(DATA / "desk_val.jsonl")


@pytest.mark.parametrize(
    ("call", "said"),
    [
        (["route", "hi", "--routes", "{missing}"], "--routes {missing}: file not found"),
        (["route", "--data", "{missing}"], "--data {missing}: file not found"),
        (["route", "hi", "--routes", ROUTES, "--fit-on", "{missing}"], "--fit-on {missing}: file not found"),
        (["eval", "--data", "{missing}"], "--data {missing}: file not found"),
        (["eval", "--data", VAL, "--fit-on", "{missing}", "--routes", ROUTES], "--fit-on {missing}: file not found"),
        (["fit", "--data", "{missing}", "--out", "{tmp}/c.json"], "--data {missing}: file not found"),
        (["fit", "--data", VAL, "--routes", "{missing}", "-o", "{tmp}/c.json"], "--routes {missing}: file not found"),
        (["route", "hi", "--routes", "{tmp}"], "--routes {tmp}: is a folder, not a file: name the file in it"),
        (["eval", "--data", "{tmp}"], "--data {tmp}: is a folder, not a file: name the file in it"),
        (["route", "--data", "{empty}"], '--data {empty}: no requests: give one {{"text": "..."}} per line'),
        (["eval", "--data", "{empty}"], '--data {empty}: no rows: give one {{"text": ..., "route": ...}} per line'),
        (["route", "hi", "--routes", "{bad}"], "--routes {bad}:1: invalid JSON: Expecting value"),
    ],
)
def test_a_file_option_that_is_wrong_is_named_with_what_to_do(call: list[str], said: str, tmp_path: Path) -> None:
    names = {"tmp": tmp_path, "missing": tmp_path / "missing.jsonl", "empty": tmp_path / "empty.jsonl"}
    names["bad"] = tmp_path / "bad.json"
    names["empty"].write_text("\n", encoding="utf-8")
    names["bad"].write_text("[oops]", encoding="utf-8")
    result = CliRunner().invoke(app, [part.format(**names) for part in call])
    assert result.exit_code == 2, result.output
    assert result.output == f"error: {said.format(**names)}\n"


def test_the_same_file_given_to_two_options_is_named_as_itself(tmp_path: Path) -> None:
    """Which of the two options a file error is about is unknown, so the error names the file only."""
    missing = tmp_path / "missing.jsonl"
    result = CliRunner().invoke(app, ["eval", "--data", str(missing), "--fit-on", str(missing), "--routes", ROUTES])
    assert (result.exit_code, result.output) == (2, f"error: {missing}: file not found\n")


@pytest.mark.parametrize("command", ["route", "fit", "eval", "demo", "replay", "graph", "trace", "serve", "mcp"])
def test_every_command_has_help(command: str) -> None:
    result = CliRunner().invoke(app, [command, "--help"])
    assert result.exit_code == 0, result.output
    assert f"jeeves-router {command} [OPTIONS]" in result.output


def test_fit_help_says_out_is_optional_with_classifier() -> None:
    """``fit --classifier`` runs without ``--out`` (the threshold is printed), so its help must not call it required."""
    import typer.main

    fit = typer.main.get_command(app).commands["fit"]  # type: ignore[attr-defined]
    (out,) = [p for p in fit.params if "--out" in p.opts]
    assert "required, except with --classifier" in " ".join(out.help.split()), out.help
