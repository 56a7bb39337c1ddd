"""The README's examples run, and print what the README says they print.

The ``python`` blocks run top to bottom in one namespace, as a reader pastes them into one
notebook: a ``"provider:model"`` string gets a test model (no key, no network), the HTTP
clients call the app the README's ``jeeves-router serve`` command builds, on 127.0.0.1, and
the reader's own files (``my_routes.json``, ...) are the shipped desk's. Then the commands
the prose quotes (``jeeves-router replay runs.db --session s-42``, ...) run on what the blocks
recorded. The ``bash`` blocks' commands run too, and a ``#`` line under a command is output it
must print. What is not run is listed here, each with its reason (``NOT_RUN``,
``COMMANDS_NOT_RUN``); ``tests/test_readme.py`` still checks those blocks' imports and calls.
"""

from __future__ import annotations

import ast
import inspect
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.readme_text import (
    README,
    bash_commands,
    inline_commands,
    provider_stand_ins,
    python_blocks,
    python_blocks_at,
)

#: The ``python`` blocks that are not run, by their first line (which says why, in the README
#: too), and the reason; each is still checked above for its imports and calls.
NOT_RUN = {
    'HandoffRouter(routes, fallback_route="general")': "an equivalence with placeholders (<...>), not code",
    "# needs a running OpenTelemetry collector (OTLP over HTTP; localhost:4318 unless configured)": (
        "exports spans to a collector, and sets the process's tracer provider for good"
    ),
    "# needs PostgreSQL (PG_URL) and a desk of your own (Agent(...) below)": "needs PostgreSQL, and DBOS launched",
}

#: The ``bash`` commands that are not run, by how they start, and the reason.
COMMANDS_NOT_RUN = {
    "pip install": "installs packages: the tests run with the dev extra installed",
    "bash .ci/run": "the whole check, this suite included",
    "jeeves-router serve": "serves until stopped: the README's HTTP clients run against the app it builds",
    "jeeves-router mcp": "serves until stopped (tests/test_mcp_serve.py serves a desk over MCP)",
}

#: Files the examples read as the reader's own, stood in for by the shipped desk's data, and
#: programs a command reads from (``some_export | ...``), stood in for by the file they print.
DATA = Path(__file__).resolve().parents[1] / "jeeves_router" / "data"
USER_FILES = {
    "my_routes.json": "desk_routes.json",
    "my_val.jsonl": "desk_val.jsonl",
    "my_test.jsonl": "desk_test.jsonl",
}
STAND_INS = {"some_export": "my_test.jsonl"}

#: Where the README's HTTP clients find the served desk.
SERVED_AT = "http://127.0.0.1:8000"


def write_user_files(folder: Path) -> None:
    for mine, shipped in USER_FILES.items():
        (folder / mine).write_text((DATA / shipped).read_text(encoding="utf-8"), encoding="utf-8")
    texts = [json.loads(line)["text"] for line in (DATA / "desk_test.jsonl").read_text(encoding="utf-8").splitlines()]
    (folder / "requests.txt").write_text("".join(f"{t}\n" for t in texts[:5]), encoding="utf-8")
    (folder / "requests.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts[:5]), encoding="utf-8")


def first_line(block: str) -> str:
    return block.splitlines()[0]


def test_the_blocks_not_run_are_in_the_readme() -> None:
    first_lines = [first_line(block) for block in python_blocks()]
    assert sorted(line for line in first_lines if line in NOT_RUN) == sorted(NOT_RUN)


async def run_block(block: str, line: int, namespace: dict[str, Any]) -> int:
    """Run one block in ``namespace``, then the ``test_*`` functions it defines, as the reader's
    pytest would (the parser's property tests): how many tests it defined."""
    before = dict(namespace)
    code = compile(block, f"README.md line {line}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    outcome = eval(code, namespace)  # the README's own example
    if inspect.iscoroutine(outcome):
        await outcome
    tests = [f for name, f in namespace.items() if name.startswith("test_") and before.get(name) is not f]
    for test in tests:
        test()
    return len(tests)


async def run_blocks(server_url: str, namespace: dict[str, Any]) -> tuple[int, int]:
    """Run the blocks in README order: (blocks run, ``test_*`` functions they defined and ran)."""
    ran = tests = 0
    for line, block in python_blocks_at():
        if first_line(block) not in NOT_RUN:
            tests += await run_block(block.replace(SERVED_AT, server_url), line, namespace)
            ran += 1
    return ran, tests


def test_every_readme_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from jeeves_router.models import prices, registry
    from tests.serve_apps import running, served_by_cli

    monkeypatch.chdir(tmp_path)
    write_user_files(tmp_path)
    monkeypatch.setenv("CRM_TOKEN", "a-token")  # the MCP example reads its server's token
    monkeypatch.setattr(prices, "_DEFAULT_PRICES", dict(prices._DEFAULT_PRICES))  # the Cost block's set_price
    monkeypatch.setattr(registry, "_CUSTOM", provider_stand_ins())
    served = [words[2:] for _, words, _ in bash_commands() if words[:2] == ["jeeves-router", "serve"]]
    assert len(served) == 1
    namespace: dict[str, Any] = {}
    # on a free port (8000 may be taken): the clients' address is replaced by the server's
    with running(served_by_cli(pytest.MonkeyPatch(), served[0])) as server:
        ran, tests = anyio.run(run_blocks, server.url, namespace)
    assert ran == len(python_blocks()) - len(NOT_RUN)
    assert tests >= 2  # the parser's property tests, run with Hypothesis
    # what the served desk's client block says it gets
    assert namespace["reply"].choices[0].message.content
    decision = namespace["reply"].model_extra["jeeves"]
    assert (decision["route"], decision["confidence"]) == ("billing", 0.92)
    # the commands the prose quotes, on what the blocks recorded (runs.db, session s-42)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-used")  # the graph the README draws: the desk on OpenAI
    quoted = [(line, words) for line, words in inline_commands() if not_run(words) is None]
    for line, words in quoted:
        code, out = run_command([word.replace("jeeves_router/data/", f"{DATA}/") for word in words], tmp_path)
        assert code == 0, f"README line {line}: {shlex.join(words)} exited {code}:\n{out[-2000:]}"
        if words[1] == "graph":
            assert out == mermaid(), f"README line {line}: {shlex.join(words)} prints another graph:\n{out}"
    assert len(quoted) >= 5 and (tmp_path / "trace.html").is_file()


def mermaid() -> str:
    (block,) = re.findall(r"```mermaid\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    return str(block)


def not_run(words: list[str]) -> str | None:
    return next((why for start, why in COMMANDS_NOT_RUN.items() if words[: len(start.split())] == start.split()), None)


def run_command(words: list[str], folder: Path) -> tuple[int, str]:
    """Run one README command in ``folder``: (exit code, what it printed)."""
    from typer.testing import CliRunner

    from jeeves_router.cli import app

    stdin: str | None = None
    if "|" in words:  # `program | jeeves-router ...`: the program's output on stdin
        cut = words.index("|")
        stdin = (folder / STAND_INS[" ".join(words[:cut])]).read_text(encoding="utf-8")
        words = words[cut + 1 :]
    if "<" in words:
        cut = words.index("<")
        stdin = (folder / words[cut + 1]).read_text(encoding="utf-8")
        words = words[:cut]
    if words[0] == "jeeves-router":
        result = CliRunner().invoke(app, words[1:], input=stdin)
        return result.exit_code, result.output
    assert words[0] == "python" and words[1].startswith("examples/"), f"no way to run {words}"
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    env["PYTHONPATH"] = str(README.parent)
    proc = subprocess.run(
        [sys.executable, str(README.parent / words[1]), *words[2:]],
        capture_output=True,
        text=True,
        env=env,
        cwd=folder,
        timeout=240,
        check=False,
    )
    return proc.returncode, proc.stdout + proc.stderr


@pytest.mark.slow  # the SmolLM2 example generates its answer: about 6 s
def test_every_readme_command_runs_and_prints_what_the_readme_shows(tmp_path: Path) -> None:
    write_user_files(tmp_path)
    commands = bash_commands()
    skipped = {start for start in COMMANDS_NOT_RUN for _, words, _ in commands if not_run(words) is not None}
    assert skipped == set(COMMANDS_NOT_RUN)  # every reason listed is used
    ran = 0
    for line, words, shown in commands:
        if not_run(words) is not None:
            continue
        with pytest.MonkeyPatch.context() as mp:
            mp.chdir(tmp_path)
            code, out = run_command(words, tmp_path)
        assert code == 0, f"README line {line}: {shlex.join(words)} exited {code}:\n{out[-2000:]}"
        printed = " ".join(out.split())
        for expected in shown:
            assert " ".join(expected.split()) in printed, (
                f"README line {line}: {shlex.join(words)} did not print {expected!r}"
            )
        ran += 1
    assert ran >= 10
