"""The ``module:attribute`` targets of ``jeeves-router serve``, ``mcp`` and ``graph``: one loader, one set of rules."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from jeeves_router import Agent
from jeeves_router.errors import UsageError
from jeeves_router.mcp.server import load_agent
from jeeves_router.serve import load_agents

ROOT = Path(__file__).resolve().parents[1]

DESK = """
from jeeves_router import Agent
from jeeves_router.testing import FunctionModel

def _agent(name):
    return Agent("You help.", name=name, model=FunctionModel(lambda r: "hi", name=name))

class Desks:
    front = _agent("front")

desk = _agent("desk")

def make_desk():
    return _agent("made")

def make_for(name):
    return _agent(name)

class EmbeddingClassifier:  # a classifier named where an agent was meant
    pass

classifier = EmbeddingClassifier()
"""

LOADERS = [
    pytest.param(load_agent, id="mcp"),
    pytest.param(load_agents, id="serve"),
    pytest.param(
        lambda spec: __import__("jeeves_router.cli._observe", fromlist=["x"]).import_agent(spec, option="AGENT"),
        id="graph",
    ),
]


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A module in the current directory only (not on sys.path), as a user's project is."""
    (tmp_path / "user_desk_mod.py").write_text(DESK)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    monkeypatch.delitem(sys.modules, "user_desk_mod", raising=False)
    return tmp_path


@pytest.mark.parametrize("load", LOADERS)
def test_every_command_reads_its_target_the_same_way(load, here: Path) -> None:  # type: ignore[no-untyped-def]
    for spec, name in [("user_desk_mod:desk", "desk"), ("user_desk_mod:make_desk", "made"),
                       ("user_desk_mod:Desks.front", "front")]:  # fmt: skip
        agent = load(spec)
        assert isinstance(agent, Agent) and agent.name == name, spec
    with pytest.raises(UsageError, match=r"'user_desk_mod': expected module:attribute, e\.g\. examples\."):
        load("user_desk_mod")
    with pytest.raises(UsageError, match=r"'user_desk_mod:nothing': cannot import it \(module 'user_desk_mod'"):
        load("user_desk_mod:nothing")
    with pytest.raises(UsageError, match=r"'user_desk_mod:make_for' needs arguments: name an agent or a function"):
        load("user_desk_mod:make_for")


@pytest.mark.parametrize("load", LOADERS)
def test_a_target_that_is_not_an_agent_is_named_with_the_right_article(load, here: Path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(UsageError, match=r"'user_desk_mod:classifier' is an EmbeddingClassifier, not an Agent"):
        load("user_desk_mod:classifier")
    with pytest.raises(UsageError, match=r"'sys:maxsize' is an int, not an Agent"):
        load("sys:maxsize")


def test_the_console_commands_import_a_module_of_the_current_directory(tmp_path: Path) -> None:
    (tmp_path / "user_desk_mod.py").write_text(DESK)
    script = Path(sys.executable).with_name("jeeves-router")
    if not script.exists():
        pytest.skip("the console script is not installed next to this interpreter")
    run = subprocess.run([str(script), "graph", "user_desk_mod:Desks.front"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "front" in run.stdout


RAISING = """
def make_desk():
    raise RuntimeError("no API key for the desk")
"""


@pytest.mark.parametrize("load", LOADERS)
def test_a_factory_that_raises_is_a_usage_error_naming_the_target(load, here: Path) -> None:  # type: ignore[no-untyped-def]
    (here / "user_raising_mod.py").write_text(RAISING)
    with pytest.raises(UsageError, match=r"'user_raising_mod:make_desk': calling it failed \(RuntimeError: no API"):
        load("user_raising_mod:make_desk")


def test_graph_of_a_factory_that_raises_is_one_error_line(here: Path) -> None:
    from typer.testing import CliRunner

    from jeeves_router.cli import app

    (here / "user_raising_mod.py").write_text(RAISING)
    result = CliRunner().invoke(app, ["graph", "user_raising_mod:make_desk"])
    assert result.exit_code == 2, result.output
    expected = "error: AGENT 'user_raising_mod:make_desk': calling it failed (RuntimeError: no API key for the desk)"
    assert result.output == expected + "\n"


def test_a_classifier_of_the_current_directory_is_importable_as_the_commands_targets_are(here: Path) -> None:
    """``jeeves-router eval/fit --classifier my_mod:clf`` reads a module next to the user, as ``graph`` does."""
    from jeeves_router.classify.types import RouteSpec
    from jeeves_router.cli._embed import import_classifier
    from jeeves_router.testing import StaticClassifier

    (here / "user_clf_mod.py").write_text("from jeeves_router.testing import StaticClassifier\n"
                                          "clf = StaticClassifier('billing', 0.9)\n")  # fmt: skip
    clf = import_classifier("user_clf_mod:clf", (RouteSpec("billing", "payments", ()),), option="--classifier")
    assert isinstance(clf, StaticClassifier)
    with pytest.raises(UsageError, match=r"--classifier 'user_clf_mod': expected module:attribute"):
        import_classifier("user_clf_mod", (), option="--classifier")
