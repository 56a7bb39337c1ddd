"""The README's Python examples stay in step with the API.

The examples call real model providers, so they are not run here. Each ``python`` block is
parsed (top-level ``await`` allowed); every import in it must succeed, and every call of
something it imported from ``jeeves_router`` must use keywords that callable accepts and
no more positional arguments than it takes. A renamed class, a moved module or a renamed
option makes this fail. A block holding placeholders (``<...>``) is prose, not code, and is
only checked for its imports.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
_BLOCK = re.compile(r"```python\n(.*?)```", re.S)
_PLACEHOLDER = re.compile(r"<[^<>\n]*[a-z][^<>\n]*>")


def python_blocks() -> list[str]:
    return _BLOCK.findall(README.read_text(encoding="utf-8"))


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
