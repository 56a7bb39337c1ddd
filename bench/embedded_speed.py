"""Speed of the embedded router: batched vs one-by-one, one query in process, the shell command.

Prints, with the load average at the start and end (2 shared cores make every figure move):

* ``classify_batch`` on 256 queries vs 256 ``classify_text`` calls: ms per query (median of
  rounds, interleaved) and the throughput ratio, whether every decision (route and status) is
  the same, and whether every result is (confidences and ranked scores too);
* one query in process: p50 of ``classify_text`` (shipped support-desk classifier);
* with ``--baseline DIR`` (another checkout, e.g. a worktree of the main branch), the same
  figures for that checkout's package, timed in the same process, interleaved round by round
  and query by query;
* ``jeeves-router route TEXT`` from the shell, warm (model cache built): median wall time,
  and ``python -c "import jeeves_router.cli"`` for the import share.

Run from the repository root: ``python bench/embedded_speed.py [--rounds 5] [--shell-runs 7]``
(``--shell-runs 0`` skips the shell part).
Queries come from CLINC150 test when ../shared/data is present, else the shipped desk test set.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _bytecode import compile_for_startup

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jeeves_router.classify.embedding import EmbeddingClassifier, MiniLMEncoder

CLINC_DIRS = [p / "shared" / "data" / "routing" / "clinc150" for p in ROOT.parents]
CLINC = next((d / "test.jsonl" for d in CLINC_DIRS if d.is_dir()), ROOT / "missing")
DESK = ROOT / "jeeves_router" / "data"


def queries(n: int) -> list[str]:
    path = CLINC if CLINC.is_file() else DESK / "desk_test.jsonl"
    texts = [json.loads(line)["text"] for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return (texts * (n // len(texts) + 1))[:n]


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def shell_median(cmd: list[str], runs: int) -> float:
    compile_for_startup(ROOT / "jeeves_router")  # as pip install would have (see _bytecode.py)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run(cmd, env=env, capture_output=True, check=True)  # warm: page cache, model cache
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, env=env, capture_output=True, check=True)
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def classifier_from(root: Path | None, threads: int | None) -> Any:
    """The desk classifier built by this checkout's package, or by the one under ``root``.

    A baseline package is imported under the same name: this checkout's modules are set
    aside while it is imported and its objects are built (its lazy imports run then), and
    put back afterwards, so both can be timed in one process.
    """
    if root is None:
        return EmbeddingClassifier.load(DESK / "desk_classifier.json", encoder=MiniLMEncoder(intra_op_threads=threads))
    ours = {name: mod for name, mod in sys.modules.items() if name.split(".")[0] == "jeeves_router"}
    for name in ours:
        del sys.modules[name]
    sys.path.insert(0, str(root))
    try:
        embedding = importlib.import_module("jeeves_router.classify.embedding")
        enc = embedding.MiniLMEncoder(intra_op_threads=threads)
        clf = embedding.EmbeddingClassifier.load(DESK / "desk_classifier.json", encoder=enc)
        clf.classify_batch(queries(8))
        clf.classify_text("warm up")
    finally:
        sys.path.remove(str(root))
        for name in [n for n in sys.modules if n.split(".")[0] == "jeeves_router"]:
            del sys.modules[name]
        sys.modules.update(ours)
    return clf


def timed(fn: Callable[..., Any], *args: Any) -> tuple[Any, float, float]:
    """``fn(*args)``, its wall ms and its CPU ms (every thread of the process)."""
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn(*args)
    return out, (time.perf_counter() - t0) * 1000, (time.process_time() - c0) * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--p50-queries", type=int, default=300)
    ap.add_argument("--shell-runs", type=int, default=7, help="0 skips the shell timings")
    threads_help = "onnxruntime threads per call (default 1; a batch is shared by 2 threads)"
    ap.add_argument("--threads", type=int, default=None, help=threads_help)
    ap.add_argument("--baseline", type=Path, default=None,
                    help="another checkout (e.g. the main branch) timed in the same process, interleaved")  # fmt: skip
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    print(f"start: {load()}, {os.cpu_count()} cores")
    variants = {"this checkout": classifier_from(None, args.threads)}
    if args.baseline is not None:
        variants = {"baseline": classifier_from(args.baseline, args.threads), **variants}
    texts = queries(args.batch)
    paths = ("one", "batch", "one_cpu", "batch_cpu")
    figures: dict[str, dict[str, list[float]]] = {v: {k: [] for k in paths} for v in variants}
    same = dict.fromkeys(variants, True)
    exact = dict.fromkeys(variants, True)
    for clf in variants.values():
        clf.classify_batch(texts[:32])
    for _ in range(args.rounds):  # interleaved, so load drift hits every variant and path alike
        for name, clf in variants.items():
            alone, wall, cpu = timed(lambda: [clf.classify_text(t) for t in texts])  # noqa: B023 - called at once
            figures[name]["one"].append(wall / len(texts))
            figures[name]["one_cpu"].append(cpu / len(texts))
            batch, wall, cpu = timed(clf.classify_batch, texts)
            figures[name]["batch"].append(wall / len(texts))
            figures[name]["batch_cpu"].append(cpu / len(texts))
            same[name] &= all(
                (a.classification.route, a.classification.status) == (b.classification.route, b.classification.status)
                for a, b in zip(alone, batch, strict=True)
            )
            exact[name] &= alone == batch
    single: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in variants}
    for q in queries(args.p50_queries):  # one query each in turn
        for name, clf in variants.items():
            _, wall, cpu = timed(clf.classify_text, q)
            single[name][0].append(wall)
            single[name][1].append(cpu)
    print(f"\n{len(texts)} queries, ms per query (median of {args.rounds} interleaved rounds; wall / CPU of "
          f"every thread), and one query at a time (p50 over {args.p50_queries}):\n")  # fmt: skip
    print("| encoder | one by one | batched | throughput ratio | identical decisions | identical results "
          "| one query p50 |\n|---|---|---|---|---|---|---|")  # fmt: skip
    for name, clf in variants.items():
        med = {k: statistics.median(v) for k, v in figures[name].items()}
        p50, p50_cpu = statistics.median(single[name][0]), statistics.median(single[name][1])
        source = Path(type(clf).__init__.__code__.co_filename).parents[3]  # the checkout it came from
        print(f"| {name} ({source}): {clf.encoder.name} | {med['one']:.2f} / {med['one_cpu']:.2f} | "
              f"{med['batch']:.2f} / {med['batch_cpu']:.2f} | {med['one'] / med['batch']:.2f}x / "
              f"{med['one_cpu'] / med['batch_cpu']:.2f}x | {same[name]} | {exact[name]} | "
              f"{p50:.2f} / {p50_cpu:.2f} |")  # fmt: skip
    if args.shell_runs < 1:
        print(f"end: {load()}")
        return
    py = sys.executable
    route = shell_median([py, "-m", "jeeves_router.cli", "route", "I was charged twice"], args.shell_runs)
    imp = shell_median([py, "-c", "import jeeves_router.cli"], args.shell_runs)
    bare = shell_median([py, "-c", "pass"], args.shell_runs)
    print(f"shell, warm, median of {args.shell_runs}: `jeeves-router route` {route:.0f} ms; "
          f"`import jeeves_router.cli` {imp:.0f} ms; bare python {bare:.0f} ms")  # fmt: skip
    print(f"end: {load()}")


if __name__ == "__main__":
    main()
