"""The README's examples stay in step with the API, and do what the README says.

Each ``python`` block is parsed (top-level ``await`` allowed); every import in it must
succeed, and every call of something it imported from ``jeeves_router`` must use keywords
that callable accepts and no more positional arguments than it takes. A renamed class, a
moved module or a renamed option makes this fail. A block holding placeholders (``<...>``)
is prose, not code, and is only checked for its imports.

Then the blocks are run, top to bottom in one namespace, as a reader pastes them into one
notebook: a ``"provider:model"`` string gets a test model (no key, no network), the HTTP
clients call the app the README's ``jeeves-router serve`` command builds, on 127.0.0.1, and
the user's own files (``my_routes.json``, ...) are the shipped desk's. The ``bash`` blocks'
commands are run too, and a ``#`` line under a command is output it must print. What is
not run is listed here, each with its reason (``NOT_RUN``, ``COMMANDS_NOT_RUN``).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
_BLOCK = re.compile(r"```python\n(.*?)```", re.S)
_PLACEHOLDER = re.compile(r"<[^<>\n]*[a-z][^<>\n]*>")


def python_blocks_at() -> list[tuple[int, str]]:
    """The ``python`` blocks with the README line their code starts on."""
    text = README.read_text(encoding="utf-8")
    return [(text.count("\n", 0, m.start(1)) + 1, m.group(1)) for m in _BLOCK.finditer(text)]


def python_blocks() -> list[str]:
    return [block for _, block in python_blocks_at()]


def parse(block: str) -> ast.Module:
    """The block as a module; top-level ``await`` / ``async for`` are allowed (as in a notebook)."""
    tree: ast.Module = compile(block, "README.md", "exec", flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    return tree


def imported(tree: ast.Module) -> dict[str, Any]:
    """Run the block's imports; the names they bind, by local name."""
    names: dict[str, Any] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            module = importlib.import_module(node.module)
            for alias in node.names:
                try:
                    value = getattr(module, alias.name)
                except AttributeError:  # ``from package import submodule``, as the import statement does
                    value = importlib.import_module(f"{node.module}.{alias.name}")
                names[alias.asname or alias.name] = value
        elif isinstance(node, ast.Import):
            for alias in node.names:
                names[alias.asname or alias.name.split(".")[0]] = importlib.import_module(alias.name)
    return names


def our_calls(tree: ast.Module, names: dict[str, Any]) -> Iterator[tuple[ast.Call, Callable[..., Any]]]:
    """Calls of a name the block imported from jeeves_router."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            target = names.get(node.func.id)
            if callable(target) and (getattr(target, "__module__", "") or "").startswith("jeeves_router"):
                yield node, target


def call_problem(call: ast.Call, target: Callable[..., Any]) -> str | None:
    """Why ``call`` does not fit ``target``'s signature (``None``: it fits)."""
    params = inspect.signature(target).parameters.values()
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    keywords = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    unknown = [k.arg for k in call.keywords if k.arg is not None and k.arg not in keywords]
    if unknown:
        return f"{ast.unparse(call.func)}() has no parameter {unknown}"
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    starred = any(isinstance(a, ast.Starred) for a in call.args)
    if not starred and not any(p.kind is p.VAR_POSITIONAL for p in params) and len(call.args) > len(positional):
        name = ast.unparse(call.func)
        return f"{name}() takes {len(positional)} positional arguments, the README passes {len(call.args)}"
    return None


def checkable(block: str) -> bool:
    return not _PLACEHOLDER.search(block)


def test_the_readme_has_python_examples() -> None:
    blocks = python_blocks()
    assert len(blocks) >= 10
    assert sum(map(checkable, blocks)) >= 10


@pytest.mark.parametrize("index", range(len(python_blocks())))
def test_a_readme_example_imports_what_exists(index: int) -> None:
    block = python_blocks()[index]
    if checkable(block):
        tree = parse(block)
    else:  # prose with placeholders: only its import lines are code
        lines = [line for line in block.splitlines() if line.startswith(("from ", "import "))]
        tree = parse("\n".join(lines))
    imported(tree)


def test_the_readme_calls_our_api_with_the_arguments_it_takes() -> None:
    problems: list[str] = []
    checked = 0
    for block in filter(checkable, python_blocks()):
        tree = parse(block)
        names = imported(tree)
        for call, target in our_calls(tree, names):
            checked += 1
            problem = call_problem(call, target)
            if problem is not None:
                problems.append(f"line {call.lineno} of a README block: {problem}")
    assert problems == []
    assert checked >= 20  # the check saw the examples' calls (Agent, Router, RouterRoute, ...)


def test_the_signature_check_catches_a_renamed_option() -> None:
    from jeeves_router import Router

    tree = parse('Router(routes=[], fallback_rout="general")')
    (call, target), *_ = our_calls(tree, {"Router": Router})
    assert call_problem(call, target) == "Router() has no parameter ['fallback_rout']"
    tree = parse("Router([], 'general', 0.5, 'extra', 1, 2, 3, 4, 5, 6, 7, 8, 9, 10)")
    (call, target), *_ = our_calls(tree, {"Router": Router})
    assert call_problem(call, target) is not None


#: ``jeeves-router`` followed by its words, up to the end of a code span, a comment or a pipe.
_COMMAND = re.compile(r"jeeves-router((?: [^`\n#|<>]*)?)")


def command_problems(text: str) -> tuple[list[str], int]:
    """Subcommands and options of ``jeeves-router`` quoted in ``text`` that the CLI does not have."""
    import typer.main

    from jeeves_router.cli import app

    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    problems: list[str] = []
    checked = 0
    # a code span that starts with a command's name and an option (`fit --max-misroute 0.02`) quotes it too
    spans = re.compile(rf"`((?:{'|'.join(map(re.escape, commands))}) -[^`]*)`")
    quoted = [(m.start(), " " + m.group(1)) for m in spans.finditer(text)]
    for start, rest in [(m.start(), m.group(1)) for m in _COMMAND.finditer(text)] + quoted:
        words = rest.split()
        if not words or words[0].startswith("-"):
            continue
        line = text.count("\n", 0, start) + 1
        command = commands.get(words[0])
        if command is None:
            if words[0].isidentifier() and words[0].islower() and len(words) > 1 and words[1].startswith("-"):
                problems.append(f"README line {line}: no command {words[0]!r}")
            continue
        known = {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)} | {"--help"}
        for word in words[1:]:
            option = word.split("=")[0]
            if option.startswith("--") or (option.startswith("-") and len(option) == 2):
                checked += 1
                if option not in known:
                    problems.append(f"README line {line}: `jeeves-router {words[0]}` has no option {option}")
    return problems, checked


def test_the_readme_quotes_only_commands_and_options_the_cli_has() -> None:
    problems, checked = command_problems(README.read_text(encoding="utf-8"))
    assert problems == []
    assert checked >= 20  # the check saw the quoted options (--routes, --data, --out, --json, ...)


def test_the_command_check_catches_a_renamed_option() -> None:
    problems, _ = command_problems("run `jeeves-router fit --route r.json --data v.jsonl`\nor `eval --dta t.jsonl`")
    assert problems == [
        "README line 1: `jeeves-router fit` has no option --route",
        "README line 2: `jeeves-router eval` has no option --dta",
    ]


# --- running the examples -------------------------------------------------------------------

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


def provider_model(name: str) -> Any:
    """What a ``"provider:model"`` string resolves to while the examples run: a test model.

    It routes every request to ``billing`` (by a ``route:`` reply, or by calling the offered
    ``classify_as_billing`` tool) and answers every agent turn with "Done.".
    """
    from jeeves_router.testing import Call, FunctionModel

    def reply(request: Any) -> Any:
        classify = [spec.name for spec in request.tools if spec.name == "classify_as_billing"]
        if classify:
            return Call(classify[0], {"reason": "a payment question", "confidence": 0.9})
        return "route: billing\nconfidence: 0.9" if request.purpose == "classify" else "Done."

    return FunctionModel(reply, name=name)


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


@pytest.mark.anyio
async def test_every_readme_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from jeeves_router.models import registry
    from tests.serve_apps import running, served_by_cli

    monkeypatch.chdir(tmp_path)
    write_user_files(tmp_path)
    monkeypatch.setenv("CRM_TOKEN", "a-token")  # the MCP example reads its server's token
    monkeypatch.setattr(
        registry, "_CUSTOM", {**registry._CUSTOM, "openai": provider_model, "anthropic": provider_model}
    )
    served = [words[2:] for _, words, _ in bash_commands() if words[:2] == ["jeeves-router", "serve"]]
    assert len(served) == 1
    namespace: dict[str, Any] = {}
    ran = tests = 0
    # on a free port (8000 may be taken): the clients' address is replaced by the server's
    with running(served_by_cli(pytest.MonkeyPatch(), [*served[0], "--port", "0"])) as server:
        for line, block in python_blocks_at():
            if first_line(block) in NOT_RUN:
                continue
            tests += await run_block(block.replace(SERVED_AT, server.url), line, namespace)
            ran += 1
    assert ran == len(python_blocks()) - len(NOT_RUN)
    assert tests >= 2  # the parser's property tests, run with Hypothesis
    # what the served desk's client block says it gets
    assert namespace["reply"].choices[0].message.content
    decision = namespace["reply"].model_extra["jeeves"]
    assert (decision["route"], decision["confidence"]) == ("billing", 0.92)


def bash_commands() -> list[tuple[int, list[str], list[str]]]:
    """Each command of the ``bash`` blocks: (README line, its words, the output lines the README shows under it)."""
    text = README.read_text(encoding="utf-8")
    commands: list[tuple[int, list[str], list[str]]] = []
    for m in re.finditer(r"```bash\n(.*?)```", text, re.S):
        start = text.count("\n", 0, m.start(1)) + 1
        for offset, line in enumerate(m.group(1).splitlines()):
            if line.startswith("# ") and commands and commands[-1][0] >= start:
                commands[-1][2].append(line[2:])
            elif line.strip():
                words = shlex.split(line, comments=True)
                while "&&" in words:  # `a && b`: two commands
                    cut = words.index("&&")
                    commands.append((start + offset, words[:cut], []))
                    words = words[cut + 1 :]
                commands.append((start + offset, words, []))
    return commands


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
