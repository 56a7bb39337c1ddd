"""The cache of built model files (``_quantize.cached_file``): whole files, built once, no leftovers."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from jeeves_router.classify.embedding._quantize import cached_file


def test_a_failed_publish_leaves_no_partial_file_in_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"

    def build(path: Path) -> None:
        path.write_bytes(b"model " * 1000)

    def disk_full(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", disk_full)
    assert cached_file("m.onnx", build, directory=cache) == b"model " * 1000  # kept in memory instead
    assert sorted(p.name for p in cache.iterdir()) == []  # no staging copy left behind


def test_concurrent_first_builds_in_one_process_build_once(tmp_path: Path) -> None:
    cache, calls, second_build = tmp_path / "cache", [], threading.Event()

    def build(path: Path) -> None:
        calls.append(path)
        if len(calls) == 1:
            # Give a second builder the chance to start building too (it must wait instead).
            second_build.wait(0.5)
        else:
            second_build.set()
        path.write_bytes(os.urandom(1 << 16))

    results: list[object] = []
    threads = [threading.Thread(target=lambda: results.append(cached_file("m.onnx", build, directory=cache)))
               for _ in range(2)]  # fmt: skip
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert results == [cache / "m.onnx"] * 2
    assert sorted(p.name for p in cache.iterdir()) == ["m.onnx"]


def test_a_published_file_is_readable_by_other_users(tmp_path: Path) -> None:
    old = os.umask(0o022)  # the usual umask; a private one is honoured (below)
    try:
        path = cached_file("m.onnx", lambda p: p.write_bytes(b"model"), directory=tmp_path / "cache")
        assert isinstance(path, Path) and path.read_bytes() == b"model"
        assert path.stat().st_mode & 0o777 == 0o644  # a cache filled in an image is read by another user at run time
        os.umask(0o077)
        private = cached_file("p.onnx", lambda p: p.write_bytes(b"model"), directory=tmp_path / "cache")
        assert isinstance(private, Path) and private.stat().st_mode & 0o777 == 0o600  # as open() would make it
    finally:
        os.umask(old)
