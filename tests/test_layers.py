"""Architecture rules: lower layers never import higher ones (DESIGN.md section 3)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "jeeves_router"

# module prefix (relative to the package) -> layer
LAYERS: list[tuple[str, int]] = [
    ("errors", 1),
    ("messages", 1),
    ("usage", 1),
    ("ids", 1),
    ("settings", 1),
    ("policies", 1),
    ("results", 1),
    ("events", 1),
    ("_routing", 1),  # what a root routing event says of its turn's route (events.py exports it)
    ("_aio", 1),
    ("_loops", 1),  # what is kept per event loop, and closed with it
    ("_log", 1),
    ("_lazy", 1),
    ("_frozen", 1),
    ("_files", 1),
    ("_text", 1),
    ("_articles", 1),  # "a" or "an" before a type name in a message
    ("_args", 1),
    ("reply", 1),  # what a run says to its user: the one rule of every front door
    ("_limits", 1),  # the request size limit of every front door
    ("_slots", 1),  # the concurrency limit of every front door
    ("_shown", 1),  # what an exception's text may show outside a run (Recovery.expose_details)
    ("_toolset_host", 2),  # where toolset connections live (tools.py re-exports it)
    ("_toolsets", 2),  # toolsets and opening them around a run (tools.py re-exports them)
    ("tracing", 2),
    ("_span_attrs", 2),  # what the tracing spans show
    ("models", 2),
    ("tools", 2),
    ("mcp.server", 6),  # serves an Agent: the front
    ("mcp._ask_run", 6),  # how the server's `ask` runs its agent
    ("mcp", 2),  # the client side: a toolset next to tools
    ("runtime", 2),
    ("ledger", 2),
    ("actor", 2),
    ("classify", 3),
    ("recovery", 3),
    ("agent", 4),
    ("_run_stream", 4),  # the events of an agent's root run (agent.py re-exports RunStream)
    ("graph", 4),
    ("_models_held", 4),  # the models an agent tree holds (closed by the servers)
    ("architectures", 4),
    ("journal", 5),
    ("durable", 5),
    ("cli", 6),  # the command line: cli/ and what it runs
    ("eval", 6),
    ("serve", 6),
    ("_targets", 6),  # module:attribute targets of the commands
    ("_env", 6),  # a secret a command reads from an environment variable (--token-env, --key-env)
    ("testing", 6),
    ("_testing_classifier", 6),  # the test kit's StaticClassifier (testing.py re-exports it)
    ("__init__", 6),
]


def layer_of(module: str) -> int:
    for prefix, layer in LAYERS:  # a dotted prefix (a subpackage's module) comes before its package
        if module == prefix or module.startswith(prefix + "."):
            return layer
    raise AssertionError(f"module {module!r} has no layer: add it to LAYERS")


def package_modules() -> list[tuple[str, Path]]:
    out = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG).with_suffix("")
        out.append((".".join(rel.parts), path))
    return out


def imports_of(module: str, path: Path) -> list[tuple[str, bool]]:
    """(imported module relative to the package, is_type_checking_only)."""
    tree = ast.parse(path.read_text())
    pkg_parts = module.split(".")[:-1]
    found: list[tuple[str, bool]] = []
    tc_nodes: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for sub in ast.walk(node):
                tc_nodes.add(id(sub))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg_parts[: len(pkg_parts) - (node.level - 1)] if node.level > 1 else pkg_parts
                target = ".".join([*base, node.module] if node.module else base)
                names = [target] if node.module else [f"{target}.{a.name}".strip(".") for a in node.names]
            elif node.module and node.module.startswith("jeeves_router"):
                names = [node.module.removeprefix("jeeves_router").lstrip(".")]
            else:
                continue
            for n in names:
                if n:
                    found.append((n, id(node) in tc_nodes))
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("jeeves_router."):
                    found.append((a.name.removeprefix("jeeves_router."), id(node) in tc_nodes))
    return found


MODULES = package_modules()


@pytest.mark.parametrize(("module", "path"), MODULES, ids=[m for m, _ in MODULES])
def test_no_upward_imports(module: str, path: Path) -> None:
    mine = layer_of(module)
    for target, type_only in imports_of(module, path):
        if type_only:
            continue
        assert layer_of(target) <= mine, f"{module} (layer {mine}) imports {target} (layer {layer_of(target)})"


@pytest.mark.parametrize(("module", "path"), MODULES, ids=[m for m, _ in MODULES])
def test_provider_sdks_only_in_models(module: str, path: Path) -> None:
    if module.startswith("models."):
        return
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        names = (
            [a.name for a in node.names]
            if isinstance(node, ast.Import)
            else ([node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
        )
        for n in names:
            assert n.split(".")[0] not in ("openai", "anthropic"), f"{module} imports {n}"


@pytest.mark.parametrize(("module", "path"), MODULES, ids=[m for m, _ in MODULES])
def test_library_never_imports_testing(module: str, path: Path) -> None:
    if module in ("testing", "__init__") or module.startswith("_testing"):
        return
    kit = [t for t, _ in imports_of(module, path) if t == "testing" or t.startswith("_testing")]
    assert not kit, f"{module} imports the test kit ({kit[0]})"


@pytest.mark.parametrize(("module", "path"), MODULES, ids=[m for m, _ in MODULES])
def test_no_blocking_sleep(module: str, path: Path) -> None:
    assert "time.sleep(" not in path.read_text(), f"{module} calls time.sleep"


@pytest.mark.parametrize(("module", "path"), MODULES, ids=[m for m, _ in MODULES])
def test_architectures_never_import_the_agent(module: str, path: Path) -> None:
    """No cycle between ``agent`` and the architectures, not even a type-only one: they use ``actor.Actor``."""
    if module.split(".")[0] != "architectures":
        return
    assert all(t.split(".")[0] != "agent" for t, _ in imports_of(module, path)), f"{module} imports agent"


# Inside the actors layer: the engine core (base, react, routes, checks) never imports an
# architecture subpackage; the Router follows its specialists' handoffs with the one chain
# engine (router imports handoffs), so handoffs never import the Router; capabilities
# import neither router nor handoffs.
ACTOR_RULES: dict[str, tuple[str, ...]] = {
    "architectures.base": ("architectures.router", "architectures.handoffs", "architectures.capabilities"),
    "architectures.react": ("architectures.router", "architectures.handoffs", "architectures.capabilities"),
    "architectures.routes": ("architectures.router", "architectures.handoffs", "architectures.capabilities"),
    "architectures.checks": ("architectures.router", "architectures.handoffs", "architectures.capabilities"),
    "architectures.router": ("architectures.capabilities",),
    "architectures.capabilities": ("architectures.router", "architectures.handoffs"),
    "architectures.handoffs": ("architectures.router", "architectures.capabilities"),
}


@pytest.mark.parametrize(("module", "path"), MODULES, ids=[m for m, _ in MODULES])
def test_architecture_subpackages_keep_to_their_side(module: str, path: Path) -> None:
    banned = next((b for prefix, b in ACTOR_RULES.items() if module == prefix or module.startswith(prefix + ".")), ())
    for target, _ in imports_of(module, path):
        assert not any(target == b or target.startswith(b + ".") for b in banned), f"{module} imports {target}"
