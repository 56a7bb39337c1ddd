"""Every ``>>>`` example in the package's docstrings runs and shows what it really gives.

A user copies these examples, so each one is run as it would be pasted into a fresh
interpreter: in an empty namespace (an example imports what it uses), from a scratch working
directory (files it creates land there), with no network and no API key. An example that
needs a server, the network or a key is written as a plain code block, without ``>>>``.

Modules are found by their text (any line starting with ``>>>``) and imported only by their
own test, so collecting this file imports nothing from the package.
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

PKG = Path(__file__).resolve().parents[1] / "jeeves_router"
PROMPT = re.compile(r"^[ \t]*>>>", re.MULTILINE)


def module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def modules_with_examples() -> list[str]:
    return [module_name(p) for p in sorted(PKG.rglob("*.py")) if PROMPT.search(p.read_text(encoding="utf-8"))]


def run_examples(module: ModuleType) -> tuple[int, list[str]]:
    """Run the docstring examples of ``module`` in an empty namespace: (examples run, failure reports)."""
    tests = doctest.DocTestFinder(exclude_empty=True).find(module, globs={})
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    reports: list[str] = []
    for test in sorted(tests, key=lambda t: t.name):
        runner.run(test, out=reports.append, clear_globs=True)
    return sum(len(t.examples) for t in tests), reports


def prompts_in(module: ModuleType) -> int:
    assert module.__file__ is not None
    return len(PROMPT.findall(Path(module.__file__).read_text(encoding="utf-8")))


@pytest.mark.parametrize("name", modules_with_examples())
def test_docstring_examples_run(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    module = importlib.import_module(name)
    ran, reports = run_examples(module)
    assert not reports, "".join(reports)
    # an example doctest cannot find (in a string that is not a docstring, or on an object
    # of another module) would never run: every prompt of the file must be one that ran
    assert ran == prompts_in(module), f"{name}: {prompts_in(module)} '>>>' lines, {ran} examples run"


def test_the_package_has_examples() -> None:
    names = modules_with_examples()
    assert {"jeeves_router", "jeeves_router.agent", "jeeves_router.journal"} <= set(names)


def load_file(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[path.stem]
    return module


def test_a_wrong_example_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "planted_example.py"
    path.write_text(
        'def double(x: int) -> int:\n    """Twice ``x``.\n\n    >>> 2 * 2\n    5\n    """\n    return 2 * x\n'
    )
    ran, reports = run_examples(load_file(path))
    assert ran == 1
    assert len(reports) == 1 and "Expected:\n    5\nGot:\n    4" in reports[0]


def test_an_example_needs_its_imports(tmp_path: Path) -> None:
    path = tmp_path / "planted_import.py"
    path.write_text('"""A module.\n\n>>> half(4)\n2.0\n"""\n\n\ndef half(x: float) -> float:\n    return x / 2\n')
    _, reports = run_examples(load_file(path))
    assert len(reports) == 1 and "NameError: name 'half' is not defined" in reports[0]


def test_an_example_doctest_cannot_see_is_counted(tmp_path: Path) -> None:
    path = tmp_path / "planted_hidden.py"
    path.write_text('"""A module."""\n\nNOTE = """\n>>> 1 + 1\n3\n"""\n')
    module = load_file(path)
    ran, reports = run_examples(module)
    assert (ran, reports) == (0, [])
    assert prompts_in(module) == 1  # so test_docstring_examples_run would fail for this file
