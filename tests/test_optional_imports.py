"""One rule for optional dependencies: they type-check whether or not they are installed.

Every third-party module that ``jeeves_router`` imports, other than the base dependencies, must
be listed in pyproject's ``[[tool.mypy.overrides]] ignore_missing_imports`` block, so that
``mypy`` passes on a machine without that extra (CI installs ``.[dev]``, not the ``bench``
extra). A per-line ``# type: ignore[import-...]`` is not the rule: it does not cover every
case (``import-untyped`` is not ``import-not-found``) and hides the next one.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # the dev extra installs tomli, the same parser, before Python 3.11
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "jeeves_router"

#: Import names of ``[project] dependencies`` (and what they bring for sure).
BASE = {"pydantic", "pydantic_core", "anyio", "typing_extensions"}  # pydantic and anyio require typing_extensions


def third_party_imports() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in sorted(PKG.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top in sys.stdlib_module_names or top == "jeeves_router":
                    continue
                found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


def mypy_ignored() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    out: set[str] = set()
    for override in config["tool"]["mypy"].get("overrides", []):
        if override.get("ignore_missing_imports"):
            modules = override["module"]
            out.update(m.removesuffix(".*") for m in ([modules] if isinstance(modules, str) else modules))
    return out


def test_the_scan_sees_optional_imports() -> None:
    found = third_party_imports()
    # the scan must see imports inside functions too (optional extras are imported lazily)
    assert {"numpy", "onnxruntime", "llama_cpp", "dbos"} <= found.keys()


def test_every_optional_import_is_declared_for_mypy() -> None:
    ignored = mypy_ignored()
    missing = {m: sorted(paths) for m, paths in third_party_imports().items() if m not in BASE and m not in ignored}
    assert not missing, (
        "optional modules imported by jeeves_router but not in pyproject's mypy "
        f"ignore_missing_imports overrides (mypy fails where they are not installed): {missing}"
    )


def test_each_override_has_its_submodules() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    for override in config["tool"]["mypy"]["overrides"]:
        if override.get("ignore_missing_imports"):
            modules = set(override["module"])
            for m in modules:
                base = m.removesuffix(".*")
                assert {base, f"{base}.*"} <= modules, f"list both {base!r} and '{base}.*'"


def test_no_per_line_import_ignores() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in sorted(PKG.rglob("*.py"))
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if "type: ignore[import" in line
    ]
    assert not offenders, f"declare the module in pyproject's mypy overrides instead: {offenders}"
