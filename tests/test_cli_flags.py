"""A library error about one argument names the flag the user typed for it (``cli._errors.bad_input``).

The library's checks name their Python arguments (``grace_s must be ...``); a command whose
parameter has that name reports the error with its option (``--grace must be ...``), so one
check serves the API and the command line.
"""

from __future__ import annotations

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
