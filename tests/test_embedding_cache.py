"""The cache of built model files (``_quantize.cached_file``): whole files, built once, no leftovers."""

from __future__ import annotations

import os
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
