"""The ``jeeves-router`` command comes with the extras whose commands the README runs, and says
which extra to install when it does not.

The README has a reader install ``'jeeves-router[serve]'`` and run ``jeeves-router serve``, and
``'jeeves-router[mcp]'`` for ``jeeves-router mcp``; the command line itself (typer, rich) was only
in the ``cli`` and ``embed`` extras, so the command died with ``ModuleNotFoundError: typer``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # the dev extra installs tomli, the same parser, before Python 3.11
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
EXTRAS: dict[str, list[str]] = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
    "optional-dependencies"
]


def requirements(extra: str) -> set[str]:
    """The distributions ``pip install 'jeeves-router[extra]'`` brings, by name (extras of ours expanded)."""
    names: set[str] = set()
    for requirement in EXTRAS[extra]:
        ours = re.fullmatch(r"jeeves-router\[(.+)\]", requirement)
        if ours:
            for other in ours.group(1).split(","):
                names |= requirements(other.strip())
        else:
            match = re.match(r"[A-Za-z0-9._-]+", requirement)
            assert match is not None, requirement
            names.add(match.group(0).lower())
    return names


@pytest.mark.parametrize("extra", ["serve", "mcp", "embed"])  # jeeves-router serve / mcp / route
def test_an_extra_whose_command_the_readme_runs_brings_the_command_line(extra: str) -> None:
    assert requirements("cli") <= requirements(extra)


@pytest.mark.parametrize("missing", ["typer", "rich"])
def test_without_the_command_line_extra_the_command_names_it_in_one_line(missing: str) -> None:
    code = f"import sys\nsys.modules[{missing!r}] = None\nfrom jeeves_router.cli import main\nmain()"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", code, "serve", "desk:desk"], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2
    assert proc.stderr == (
        f"error: the jeeves-router command needs the cli extra ({missing} is not installed): "
        "pip install 'jeeves-router[cli]'\n"
    )
