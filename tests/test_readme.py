"""The README's examples stay in step with the API.

Each ``python`` block is parsed (top-level ``await`` allowed); every import in it must
succeed, and every call of something it imported from ``jeeves_router`` must use keywords
that callable accepts and no more positional arguments than it takes. A renamed class, a
moved module or a renamed option makes this fail. A block holding placeholders (``<...>``)
is prose, not code, and is only checked for its imports. The examples are run by
``tests/test_readme_runs.py``.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import inspect
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.readme_text import README, code_spans, python_blocks

_PLACEHOLDER = re.compile(r"<[^<>\n]*[a-z][^<>\n]*>")


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


# --- the API the prose names ------------------------------------------------------------------

PKG = README.parent / "jeeves_router"
_SIGNATURE = re.compile(r"([A-Za-z_][\w.]*)\((.*?)\)(?:\s*->\s*(.*))?", re.S)


def api_names() -> dict[str, Any]:
    """The names a README reader has, by name: the package's, the test kit's, and every public
    name of the modules the README's blocks import from or its prose names (``jeeves_router.serve``).

    A name two of those modules bind to different objects (``serve``) is left out: which one a
    span means is not known.
    """
    modules = {"jeeves_router", "jeeves_router.testing"}
    for block in python_blocks():
        imports = "\n".join(line for line in block.splitlines() if line.startswith(("from ", "import ")))
        for node in ast.walk(parse(block if checkable(block) else imports)):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("jeeves_router"):
                modules.add(node.module)
    for _, span in code_spans():
        for dotted in re.findall(r"\bjeeves_router(?:\.\w+)+", span):
            with contextlib.suppress(AttributeError, ImportError):
                named = resolve(dotted, {})
                modules.add(
                    named.__name__ if inspect.ismodule(named) else getattr(named, "__module__", "jeeves_router")
                )
    names: dict[str, Any] = {}
    ambiguous: set[str] = set()
    for module in map(importlib.import_module, sorted(modules)):
        for name in dir(module):  # dir(), not vars(): the lazy modules bind a name on first use
            value = getattr(module, name, None)
            if name.startswith("_") or not (getattr(value, "__module__", "") or "").startswith("jeeves_router"):
                continue
            if names.setdefault(name, value) is not value:
                ambiguous.add(name)
    return {k: v for k, v in names.items() if k not in ambiguous}


def resolve(dotted: str, names: dict[str, Any]) -> Any:
    """``Name.attr`` of a known name, or ``jeeves_router.module.attr``; AttributeError or ImportError if none."""
    parts = dotted.split(".")
    if parts[0] == "jeeves_router":
        for cut in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:cut]))
            except ImportError:
                continue
            for part in parts[cut:]:
                obj = getattr(obj, part)
            return obj
    obj = names[parts[0]]
    for part in parts[1:]:
        obj = getattr(obj, part)
    return obj


def span_problems(span: str, names: dict[str, Any], source: str) -> list[str]:
    """What a code span of the prose says about the API that is not so."""
    problems: list[str] = []
    for dotted in re.findall(r"\bjeeves_router(?:\.\w+)+", span):
        try:
            resolve(dotted, names)
        except (AttributeError, ImportError):
            if f'"{dotted}"' not in source:  # nor a span or event name the package writes
                problems.append(f"no {dotted}")
    try:
        tree: ast.AST = ast.parse(span, mode="eval")
    except SyntaxError:  # a signature: `Router(routes, *, fallback_route=None, ...) -> RunResult(...)`
        m = _SIGNATURE.fullmatch(span.strip())
        if m is None or m.group(1).split(".")[0] not in names:
            return problems
        try:
            params = ast.parse(f"def f({m.group(2)}): pass").body[0].args  # type: ignore[attr-defined]
        except SyntaxError:
            return problems
        takes = inspect.signature(resolve(m.group(1), names)).parameters
        given = [a.arg for a in (*params.posonlyargs, *params.args, *params.kwonlyargs)]
        problems += [f"{m.group(1)}() has no parameter {p!r}" for p in given if p not in takes]
        tree = ast.parse(m.group(3) or "None", mode="eval")
        if isinstance(tree.body, ast.Call) and isinstance(tree.body.func, ast.Name) and tree.body.func.id in names:
            cls = names[tree.body.func.id]
            fields = [a.id for a in tree.body.args if isinstance(a, ast.Name)]
            problems += [f"{cls.__name__} has no {f!r}" for f in fields if not hasattr(cls, f)]
        return problems
    for node in ast.walk(tree):
        root = ast.unparse(node).split(".")[0] if isinstance(node, (ast.Name, ast.Attribute)) else ""
        # `tool.called` is an event's kind: attributes are looked up on classes and modules only
        if not inspect.isclass(names.get(root)) and not inspect.ismodule(names.get(root)):
            continue
        try:
            target = resolve(ast.unparse(node), names)
        except (AttributeError, ImportError):
            problems.append(f"no {ast.unparse(node)}")
            continue
        call = next((c for c in ast.walk(tree) if isinstance(c, ast.Call) and c.func is node), None)
        if call is None or not callable(target):
            continue
        if call.args and not call.keywords and all(isinstance(a, ast.Name) for a in call.args):
            # `RunResult(output, status, ...)` lists fields, `SQLiteJournal(path)` parameters
            takes = inspect.signature(target).parameters
            if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in takes.values()):
                continue  # a wrapped __init__ (conftest's journal registry): nothing to compare with
            listed = [a.id for a in call.args if isinstance(a, ast.Name)]
            problems += [
                f"{ast.unparse(node)} has no {n!r}" for n in listed if n not in takes and not hasattr(target, n)
            ]
        elif (problem := call_problem(call, target)) is not None:
            problems.append(problem)
    return problems


def test_the_api_the_prose_names_exists_with_those_parameters() -> None:
    names = api_names()
    source = "\n".join(p.read_text(encoding="utf-8") for p in PKG.rglob("*.py"))
    problems = [f"README line {line}: {p}" for line, span in code_spans() for p in span_problems(span, names, source)]
    assert problems == []
    # the index has the names the prose uses, also those no block imports
    assert {"Router", "RunResult", "PostgresJournal", "MiniLMEncoder", "create_app", "router_server"} <= set(names)


def test_the_prose_check_catches_a_wrong_name_or_parameter() -> None:
    names = api_names()
    assert span_problems("Router(routes, *, fallback_rout=None)", names, "") == [
        "Router() has no parameter 'fallback_rout'"
    ]
    assert span_problems("Recovery(time_limt_s=60)", names, "") == ["Recovery() has no parameter ['time_limt_s']"]
    assert span_problems("RunResult.user_mesage", names, "") == ["no RunResult.user_mesage"]
    assert span_problems("jeeves_router.journal.keyd", names, "") == ["no jeeves_router.journal.keyd"]
    assert span_problems("RunResult(output, outptu)", names, "") == ["RunResult has no 'outptu'"]
    assert span_problems("tool.called", names, "") == []  # an event's kind, not the decorator's attribute
    assert span_problems("PostgresJournal(url, creat=False)", names, "") == [
        "PostgresJournal() has no parameter ['creat']"
    ]
