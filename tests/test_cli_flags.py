"""A library error about one argument names the flag the user typed for it (``cli._errors.bad_input``).

The library's checks name their Python arguments (``grace_s must be ...``); a command whose
parameter has that name reports the error with its option (``--grace must be ...``), so one
check serves the API and the command line.
"""

from __future__ import annotations

import re
import shutil
from importlib import resources
from pathlib import Path
from typing import Annotated

import pytest
import typer
from typer.testing import CliRunner

from jeeves_router.cli._errors import bad_input
from jeeves_router.errors import UsageError


def _said(message: str, argument: str | None) -> str:
    app = typer.Typer()

    @app.command()
    def command(ctx: typer.Context, grace_s: Annotated[int, typer.Option("--grace", "-g")] = 1) -> None:
        with bad_input(ctx):
            raise UsageError(message, argument=argument)

    result = CliRunner().invoke(app, [])
    assert result.exit_code == 2
    return result.output


@pytest.mark.parametrize(
    ("message", "argument", "said"),
    [
        ("grace_s must be >= 0, got -1", "grace_s", "error: --grace must be >= 0, got -1\n"),
        ("seconds after SIGTERM must be >= 0", "grace_s", "error: --grace: seconds after SIGTERM must be >= 0\n"),
        ("port must be within 0-65535", "port", "error: port must be within 0-65535\n"),  # not this command's
        ("grace_s must be >= 0", None, "error: grace_s must be >= 0\n"),  # about no one argument
    ],
)
def test_an_error_about_a_commands_parameter_names_its_flag(message: str, argument: str | None, said: str) -> None:
    assert _said(message, argument) == said


@pytest.mark.parametrize(
    ("name", "argument"),
    [("max_tokens", "max_tokens"), ("RetryPolicy.max_attempts", None), ("few_shot (examples per route)", None)],
)
def test_a_check_names_the_argument_only_when_its_name_is_one(name: str, argument: str | None) -> None:
    from jeeves_router.policies import check_count

    with pytest.raises(UsageError) as info:
        check_count(name, 0, 1)
    assert info.value.argument == argument


_DATA = Path(str(resources.files("jeeves_router") / "data"))
_NO_KEY = "a PostgreSQL journal has no key (its entries carry no checksum); leave it out"
_PG = "postgresql://someone@127.0.0.1:1/nowhere"  # refused before any connection


@pytest.mark.parametrize(
    ("command", "said"),
    [
        (["route", "hello", "--threshold", "2"], "error: --threshold must be within [0, 1], got 2.0\n"),
        (
            [
                "fit",
                "--data",
                str(_DATA / "desk_val.jsonl"),
                "--out",
                "{tmp}/c.json",
                "--max-misroute",
                "0.1",
                "--calibration",
                "isotonic",
            ],
            "error: --max-misroute needs the 'platt' calibration, not 'isotonic' (a strictly increasing map keeps "
            "the certified cut)\n",
        ),
        (["fit", "--data", "-", "--max-misroute", "1.5"], "error: --max-misroute must be within (0, 1), got 1.5\n"),
        (
            ["eval", "--data", str(_DATA / "desk_test.jsonl"), "--threshold", "-1"],
            "error: --threshold must be within [0, 1], got -1.0\n",
        ),
        (["replay", _PG, "--session", "s", "--key-env", "HOME"], f"error: --key-env: {_NO_KEY}\n"),
        (["trace", _PG, "--session", "s", "--key-env", "HOME"], f"error: --key-env: {_NO_KEY}\n"),
    ],
)
def test_every_command_names_the_flag_the_user_typed(command: list[str], said: str, tmp_path: Path) -> None:
    from jeeves_router.cli import app

    result = CliRunner().invoke(app, [part.replace("{tmp}", str(tmp_path)) for part in command])
    assert (result.exit_code, result.output) == (2, said)


_JOURNAL = Path(__file__).parent / "fixtures" / "journals" / "v1" / "desk.db"
_ROWS = '{"text": "I was charged twice", "route": "billing"}\n'
_UNSET = "JEEVES_TEST_SURELY_UNSET_VAR"
# One wrong call for each place a command's error names one of its options or arguments.
_WRONG_CALLS = [
    ["route"],
    ["route", "hello", "--scorer", "late"],
    ["route", "hello", "--encoder", "mpnet"],
    ["fit", "--data", "{rows}"],
    ["fit", "--data", "{rows}", "--out", "{tmp}/nope/c.json"],
    ["fit", "--data", "{rows}", "--out", "{tmp}/c.json", "--oos-share", "0.1"],
    ["fit", "--data", "{rows}", "--classifier", "mod:clf"],
    ["fit", "--data", "{rows}", "--classifier", "no_such_module_here:clf", "--max-misroute", "0.1"],
    ["eval", "--data", "{rows}", "--out", "{tmp}/misrouted.txt"],
    ["eval", "--data", "{rows}", "--plots", "{rows}"],
    ["eval", "--data", "{rows}", "--classifier", "mod:clf", "--threshold", "0.5"],
    ["eval", "--data", "{rows}", "--classifier", "svm"],
    ["eval", "--data", "{rows}", "--classifier", "late", "--scorer", "late"],
    ["eval", "--data", "{rows}", "--classifier", "late"],
    ["eval", "--data", "{rows}", "--classifier", "no_such_module_here:clf"],
    ["replay", "{journal}", "--session", "s", "--key-env", _UNSET],
    ["replay", _PG, "--session", "s", "--key-env", "HOME"],
    ["trace", "{journal}", "--session", "s", "--key-env", _UNSET],
    ["trace", "{journal}", "--session", "s", "--out", "{tmp}/nope/t.html"],
    ["trace", "{journal}", "--session", "s", "--out", "{tmp}/t.html", "--agent", "no_such_module_here:desk"],
    ["graph", "not-a-spec"],
    ["serve", "no_such_module_here:desk"],
    ["serve", "no_such_module_here:desk", "--token-env", _UNSET],
    ["serve", "no_such_module_here:desk", "--max-request-bytes", "0"],
    ["mcp", "no_such_module_here:desk", "--transport", "carrier-pigeon"],
    ["mcp", "no_such_module_here:desk", "--host", "127.0.0.1", "--port", "9"],
    ["mcp", "no_such_module_here:desk", "--transport", "http", "--token-env", _UNSET],
    ["mcp", "no_such_module_here:desk"],
]
_RENAMED = "-v2"


@pytest.mark.parametrize("call", _WRONG_CALLS, ids=lambda call: " ".join(call[:2]))
def test_every_error_names_an_option_the_command_has_even_after_a_rename(
    call: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each command's options are renamed (``--out`` -> ``--out-v2``): its errors follow the rename.

    An error spelling an option by hand would name one that no longer exists; every option and
    argument an error names is looked up in the command's own parameters.
    """
    pytest.importorskip("onnxruntime")
    pytest.importorskip("mcp")
    import typer.main
    import typer.testing

    from jeeves_router.cli import app

    monkeypatch.delenv(_UNSET, raising=False)
    monkeypatch.chdir(tmp_path)
    rows = tmp_path / "rows.jsonl"
    rows.write_text(_ROWS, encoding="utf-8")
    shutil.copy(_JOURNAL, tmp_path / "desk.db")
    group = typer.main.get_command(app)
    assert isinstance(group, typer.main.TyperGroup)
    for command in group.commands.values():
        for param in command.params:
            if param.param_type_name == "option":
                param.opts = [o + _RENAMED if o.startswith("--") else o for o in param.opts]
    monkeypatch.setattr(typer.testing, "_get_command", lambda _app: group)
    filled = [
        part.format(tmp=tmp_path, rows=rows, journal=tmp_path / "desk.db") for part in call
    ]  # then the options as renamed:
    args = [part + _RENAMED if part.startswith("--") else part for part in filled]

    result = CliRunner().invoke(app, args)

    assert result.exit_code == 2, result.output
    line = result.output
    assert line.startswith("error: ") and line.count("\n") == 1, line
    command = group.commands[call[0]]
    options = {o for p in command.params for o in p.opts}
    arguments = {str(p.name).upper() for p in command.params if p.param_type_name == "argument"}
    named = re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", line)
    assert named or re.search(r"\b[A-Z]+ '", line), line  # each of these errors is about an option or argument
    assert [o for o in named if o not in options] == [], line
    assert [a for a in re.findall(r"\b([A-Z]+) '", line) if a not in arguments] == [], line
