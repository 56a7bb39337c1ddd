"""Start-up cost, as behaviour: which modules an import or a command loads (no timing here).

The timings live in ``bench/startup.py``; these tests pin what makes them: importing the package
loads none of its subsystems, ``Agent`` loads neither the Router nor handoffs, ``Router`` loads
neither capabilities, the journal nor the LLM classifier, and the command line builds without
the journal, pydantic, numpy or the agent machinery.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jeeves_router._lazy import lazy_exports

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "jeeves_router"

#: Packages whose names are imported on first use (``lazy_exports``).
LAZY_PACKAGES = (
    "jeeves_router",
    "jeeves_router.architectures",
    "jeeves_router.classify",
    "jeeves_router.classify.embedding",
    "jeeves_router.journal",
    "jeeves_router.models",
    "jeeves_router.recovery",
)


def loaded_after(code: str) -> set[str]:
    """The modules loaded by ``code`` in a fresh interpreter (run from the repository root)."""
    script = f"import sys\n{code}\nprint('\\n'.join(sorted(sys.modules)))\n"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return set(proc.stdout.split())


def ours(modules: set[str]) -> set[str]:
    return {m.removeprefix("jeeves_router.") for m in modules if m.startswith("jeeves_router.")}


def under(modules: set[str], *prefixes: str) -> set[str]:
    return {m for m in modules if any(m == p or m.startswith(p + ".") for p in prefixes)}


def test_importing_the_package_loads_none_of_its_subsystems() -> None:
    loaded = loaded_after("import jeeves_router")
    assert ours(loaded) == {"_lazy"}
    assert not under(loaded, "anyio", "dataclasses", "logging", "pydantic", "numpy")


#: Subsystems an application pays for only when it uses them.
OPTIONAL = ("architectures.capabilities", "classify.llm", "classify.embedding", "journal", "durable", "serve", "mcp",
            "testing", "graph")  # fmt: skip


def test_the_agent_loads_no_router_and_no_optional_subsystem() -> None:
    loaded = loaded_after("from jeeves_router import Agent, tool")
    assert {"agent", "architectures.react"} <= ours(loaded)
    assert not under(ours(loaded), *OPTIONAL, "architectures.router", "architectures.handoffs", "classify.toolcall")
    assert not under(loaded, "pydantic", "numpy", "sqlite3", "uuid", "random", "openai", "anthropic")


def test_agent_and_router_load_no_optional_subsystem() -> None:
    loaded = loaded_after("from jeeves_router import Agent, Router, RouterRoute, tool")
    assert {"agent", "architectures.react", "architectures.router.router"} <= ours(loaded)
    assert not under(ours(loaded), *OPTIONAL)
    assert not under(loaded, "pydantic", "numpy", "sqlite3", "uuid", "random", "openai", "anthropic")


def test_a_router_classifying_with_a_model_loads_the_llm_classifier_when_built() -> None:
    loaded = loaded_after(
        "from jeeves_router import Agent, Router, RouterRoute\n"
        "assert 'jeeves_router.classify.llm' not in sys.modules\n"
        "billing = Agent('Billing.', name='billing')\n"
        "Router([RouterRoute('billing', billing)], classifier_model='openai:gpt-4.1-nano')"
    )
    assert "classify.llm" in ours(loaded)


def test_the_command_line_builds_without_the_journal_pydantic_numpy_or_the_agent() -> None:
    loaded = loaded_after("from jeeves_router.cli import app")
    assert not under(ours(loaded), "journal.records", "journal.sqlite", "agent", "architectures", "classify.embedding")
    # what typer itself loads is its business (older versions use the standalone click)
    assert not under(loaded - loaded_after("import typer"), "pydantic", "numpy", "onnxruntime", "click")


def test_routing_from_the_command_line_loads_no_pydantic() -> None:
    # typer 0.29 parses every parameter through pydantic (140-190 ms more per command here):
    # pyproject keeps typer below it, and nothing of ours on this path needs pydantic either.
    code = (
        "from jeeves_router.cli import app\n"
        "sys.argv = ['jeeves-router', 'route', 'I was charged twice']\n"
        "try:\n    app()\nexcept SystemExit as exit:\n    assert not exit.code, exit.code"
    )
    loaded = loaded_after(code)
    assert "jeeves_router.classify.embedding.classifier" in loaded  # it did route
    assert not under(loaded, "pydantic", "pydantic_core")


@pytest.mark.parametrize(("preset", "threads"), [(None, 1), ("2", 2)])
def test_routing_one_request_from_the_command_line_starts_blas_with_one_thread(
    preset: str | None, threads: int
) -> None:
    # OpenBLAS sets up a buffer per thread when numpy is imported (about 60-90 ms here) and one
    # short request gains nothing from them; a value the user set is kept.
    code = (
        "import os\n"
        + (
            f"os.environ['OPENBLAS_NUM_THREADS'] = {preset!r}\n"
            if preset
            else "os.environ.pop('OPENBLAS_NUM_THREADS', None)\n"
        )
        + "from jeeves_router.cli._embed import load_embedding\n"
        "load_embedding(None, None, None, None, one_request=True, typed=str)\n"
        "import threadpoolctl\n"
        "blas = [str(i['num_threads']) for i in threadpoolctl.threadpool_info() if i['user_api'] == 'blas']\n"
        "print('BLAS=' + ','.join(blas))"
    )
    loaded = loaded_after(code)
    assert f"BLAS={threads}" in loaded


def test_the_whole_public_namespace_still_resolves() -> None:
    import jeeves_router

    for name in jeeves_router.__all__:
        assert getattr(jeeves_router, name) is not None, name
    assert set(jeeves_router.__all__) <= set(dir(jeeves_router))


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_every_lazy_name_resolves_and_is_listed(package: str) -> None:
    module = importlib.import_module(package)
    for name in module.__all__:
        value = getattr(module, name)
        assert name in vars(module), f"{package}.{name} is not kept after its first use"
        assert getattr(module, name) is value
    assert set(module.__all__) <= set(dir(module))
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        module.not_a_name  # noqa: B018


def type_checking_names(path: Path) -> set[str]:
    """Names a module imports under ``if TYPE_CHECKING:``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for sub in ast.walk(node):
                if isinstance(sub, ast.ImportFrom):
                    found.update(a.asname or a.name for a in sub.names)
    return found


@pytest.mark.parametrize("package", [p for p in LAZY_PACKAGES if p != "jeeves_router"])
def test_type_checkers_see_every_lazy_name(package: str) -> None:
    # the TYPE_CHECKING block spells out what lazy_exports provides, so mypy and the layering
    # test see real imports, not strings
    module = importlib.import_module(package)
    path = PKG.joinpath(*package.split(".")[1:], "__init__.py")
    eager = {n for n in module.__all__ if n in vars(module) and n not in type_checking_names(path)}
    assert set(module.__all__) - eager <= type_checking_names(path)


def test_the_package_spells_out_its_public_names_for_type_checkers() -> None:
    import jeeves_router

    assert set(jeeves_router.__all__) <= type_checking_names(PKG / "__init__.py")


def test_lazy_exports_refuses_a_name_listed_twice() -> None:
    with pytest.raises(ValueError, match="'x' listed twice"):
        lazy_exports("pkg", {".a": ("x",)}, {".b": ("x",)})


def test_the_model_digest_is_remembered_per_file_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("onnxruntime")
    from jeeves_router.classify.embedding import _digests, _quantize

    builds: list[Path] = []

    def fake_build(source: Path, target: Path) -> None:
        builds.append(source)
        target.write_bytes(b"quantized")

    monkeypatch.setattr(_quantize, "_build", fake_build)
    source = tmp_path / "pkg" / "model.onnx"
    source.parent.mkdir()
    source.write_bytes(b"weights v1")
    cache = tmp_path / "cache"
    v1 = hashlib.sha256(b"weights v1").hexdigest()[:16]

    first = _quantize.quantized_model(source, directory=cache)
    assert isinstance(first, Path) and v1 in first.name and len(builds) == 1
    assert _quantize.quantized_model(source, directory=cache) == first  # published: the memo is written now
    memo = cache / _digests.DIGEST_MEMO
    ((key, remembered),) = [line.split(" ") for line in memo.read_text().splitlines()]
    assert remembered == v1
    # while the file is unchanged, the memo (not the file's bytes) names the cached model
    memo.write_text(f"{key} 0123456789abcdef\n")
    stand_in = _quantize.quantized_model(source, directory=cache)
    assert isinstance(stand_in, Path) and "0123456789abcdef" in stand_in.name and len(builds) == 2
    # a reinstalled file (new size and time) is hashed again
    source.write_bytes(b"weights v2, longer")
    os.utime(source, ns=(1, 1))
    second = _quantize.quantized_model(source, directory=cache)
    assert isinstance(second, Path) and hashlib.sha256(b"weights v2, longer").hexdigest()[:16] in second.name


def test_the_digest_memo_keeps_a_bounded_number_of_file_versions(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    from jeeves_router.classify.embedding import _digests

    cache = tmp_path / "cache"
    cache.mkdir()
    legacy = cache / ".digest-0123456789abcdef"  # the one-file-per-version memo of earlier releases
    legacy.write_text("0123456789abcdef")
    installs = []
    for i in range(_digests.DIGEST_MEMO_ENTRIES + 5):  # a fresh environment per CI run: a new path each time
        source = tmp_path / f"venv{i}" / "model.onnx"
        source.parent.mkdir()
        source.write_bytes(f"weights {i}".encode())
        installs.append(source)
        assert _digests.source_digest(source, cache) == hashlib.sha256(f"weights {i}".encode()).hexdigest()[:16]
    assert sorted(p.name for p in cache.iterdir()) == [_digests.DIGEST_MEMO]
    lines = (cache / _digests.DIGEST_MEMO).read_text().splitlines()
    assert len(lines) == _digests.DIGEST_MEMO_ENTRIES

    # the newest versions are kept, the oldest dropped. Rewrite a file with the same size and put
    # its time back: the memo answers by (path, size, time), so a kept entry gives the old digest
    def rewritten(source: Path, text: bytes) -> str:
        st = source.stat()
        source.write_bytes(text)
        os.utime(source, ns=(st.st_atime_ns, st.st_mtime_ns))
        return _digests.source_digest(source, cache)

    newest, oldest = len(installs) - 1, 0
    assert rewritten(installs[newest], b"weights XX") == hashlib.sha256(f"weights {newest}".encode()).hexdigest()[:16]
    assert rewritten(installs[oldest], b"weights Y") == hashlib.sha256(b"weights Y").hexdigest()[:16]


def test_a_damaged_line_of_the_digest_memo_is_hashed_again_not_believed(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    from jeeves_router.classify.embedding import _digests

    cache = tmp_path / "cache"
    cache.mkdir()
    source = tmp_path / "model.onnx"
    source.write_bytes(b"weights")
    digest = hashlib.sha256(b"weights").hexdigest()[:16]
    assert _digests.source_digest(source, cache) == digest
    memo = cache / _digests.DIGEST_MEMO
    (key, _), *_ = [line.split(" ") for line in memo.read_text().splitlines()]
    for damaged in (f"{key} 0123", f"{key} 0123456789ABCDEF", f"{key} 0123456789abcdef extra"):
        memo.write_text(damaged + "\n")  # a cut write, another tool's edit
        assert _digests.source_digest(source, cache) == digest, damaged
        assert memo.read_text().splitlines()[0] == f"{key} {digest}"  # and the memo is mended
