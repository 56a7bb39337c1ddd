"""Seams: a saved classifier or threshold file is replaced whole, never left cut short or mixed.

A write cut short is made real in a child process: ``RLIMIT_FSIZE`` makes the operating system
refuse every byte past a size (``File too large``), as a full disk does part-way through.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from jeeves_router.classify.embedding import EmbeddingClassifier, HashingEncoder
from jeeves_router.classify.types import RouteSpec

ROOT = Path(__file__).resolve().parents[1]
OLD = b'{"an earlier": "file"}\n'

# Runs ``code`` in a process whose files cannot grow past argv[1] bytes.
_LIMITED = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead of killing the process
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[1]), resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
"""

_SAVE = """
from jeeves_router.classify.embedding import EmbeddingClassifier, HashingEncoder
from jeeves_router.classify.types import RouteSpec
routes = [RouteSpec(f"r{i}", f"route {i}", tuple(f"example {i} {j}" for j in range(20))) for i in range(30)]
EmbeddingClassifier(routes, encoder=HashingEncoder(), scorer="centroid").save(sys.argv[2])
"""

_CERTIFY = """
from jeeves_router.cli import app
app(["fit", "--data", sys.argv[3], "--classifier", "tests.test_cli:desk_embedded", "--max-misroute", "0.2",
     "--risk-confidence", "0.8", "--out", sys.argv[2]])
"""


def limited(code: str, limit: int, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run(
        [sys.executable, "-c", _LIMITED + code, str(limit), *args], cwd=ROOT, env=env, capture_output=True, text=True
    )


def test_a_save_cut_short_leaves_the_earlier_file_whole(tmp_path: Path) -> None:
    path = tmp_path / "clf.json"
    path.write_bytes(OLD)
    child = limited(_SAVE, 4096, str(path))  # the classifier's JSON is several times larger
    assert child.returncode != 0 and "File too large" in child.stderr, child.stderr
    assert path.read_bytes() == OLD
    assert [p.name for p in tmp_path.iterdir()] == ["clf.json"]  # no temporary file left behind


def test_a_certified_threshold_file_cut_short_leaves_the_earlier_file_whole(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    from importlib import resources

    path, data = tmp_path / "risk.json", Path(str(resources.files("jeeves_router") / "data" / "desk_test.jsonl"))
    path.write_bytes(OLD)
    child = limited(_CERTIFY, 64, str(path), str(data))  # the threshold file is about 600 bytes
    assert child.returncode != 0 and "File too large" in child.stderr + child.stdout, child.stderr
    assert path.read_bytes() == OLD
    assert [p.name for p in tmp_path.iterdir()] == ["risk.json"]


def test_two_saves_at_once_leave_one_whole_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both writers open their file before either writes; the longer one writes first.

    Written in place, the shorter content would land over the start of the longer one.
    """
    enc = HashingEncoder()
    small = EmbeddingClassifier([RouteSpec("a", "apples"), RouteSpec("b", "bananas")], encoder=enc)
    routes = [RouteSpec(f"r{i}", f"route {i}", tuple(f"example {i} {j}" for j in range(5))) for i in range(10)]
    large = EmbeddingClassifier(routes, encoder=enc)
    both_open, long_written = threading.Barrier(2, timeout=30), threading.Event()
    real_open = io.open

    class Choreographed:
        def __init__(self, file: Any) -> None:
            self._file = file

        def __getattr__(self, name: str) -> Any:
            return getattr(self._file, name)

        def __enter__(self) -> Choreographed:
            return self

        def __exit__(self, *exc: object) -> None:
            self._file.__exit__(*exc)

        def write(self, data: Any) -> int:
            is_long = threading.current_thread().name == "large"
            if not is_long:
                assert long_written.wait(30)
            n: int = self._file.write(data)
            self._file.flush()
            if is_long:
                long_written.set()
            return n

    def opening(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        opened = real_open(file, mode, *args, **kwargs)
        if "w" not in mode:
            return opened
        both_open.wait()
        return Choreographed(opened)

    monkeypatch.setattr(io, "open", opening)
    path = tmp_path / "clf.json"
    errors: list[BaseException] = []

    def save(clf: EmbeddingClassifier) -> None:
        try:
            clf.save(path)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=save, args=(clf,), name=n) for n, clf in (("small", small), ("large", large))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    monkeypatch.undo()
    assert not errors
    assert len(small_json := json.dumps(small.to_dict())) < len(json.dumps(large.to_dict()))
    assert json.loads(path.read_text()) in (json.loads(small_json), large.to_dict())
    assert [p.name for p in tmp_path.iterdir()] == ["clf.json"]


def test_a_saved_file_keeps_the_earlier_files_permissions(tmp_path: Path) -> None:
    path = tmp_path / "clf.json"
    clf = EmbeddingClassifier([RouteSpec("a", "apples"), RouteSpec("b", "bananas")], encoder=HashingEncoder())
    old = os.umask(0o022)
    try:
        clf.save(path)
        assert path.stat().st_mode & 0o777 == 0o644  # not the temporary file's owner-only mode
        path.chmod(0o600)
        clf.save(path)
        assert path.stat().st_mode & 0o777 == 0o600
        os.umask(0o077)  # a private umask: a new file is the owner's only, as open() would make it
        clf.save(tmp_path / "private.json")
        assert (tmp_path / "private.json").stat().st_mode & 0o777 == 0o600
    finally:
        os.umask(old)
