"""Speed of the embedded router: batched vs one-by-one, one query in process, the shell command.

Prints, with the load average at the start and end (2 shared cores make every figure move):

* ``classify_batch`` on 256 queries vs 256 ``classify_text`` calls: ms per query (median of
  rounds, interleaved) and the throughput ratio, and whether every decision is the same;
* one query in process: p50 of ``classify_text`` (shipped support-desk classifier);
* ``jeeves-router route TEXT`` from the shell, warm (model cache built): median wall time,
  and ``python -c "import jeeves_router.cli"`` for the import share.

Run from the repository root: ``python bench/embedded_speed.py [--rounds 5] [--shell-runs 7]``
(``--shell-runs 0`` skips the shell part).
Queries come from CLINC150 test when ../shared/data is present, else the shipped desk test set.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

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
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run(cmd, env=env, capture_output=True, check=True)  # warm: page cache, model cache
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, env=env, capture_output=True, check=True)
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--p50-queries", type=int, default=300)
    ap.add_argument("--shell-runs", type=int, default=7, help="0 skips the shell timings")
    ap.add_argument("--threads", type=int, default=None, help="onnxruntime intra-op threads (default: up to 2)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    print(f"start: {load()}, {os.cpu_count()} cores")
    enc = MiniLMEncoder(intra_op_threads=args.threads)
    clf = EmbeddingClassifier.load(DESK / "desk_classifier.json", encoder=enc)
    texts = queries(args.batch)
    clf.classify_batch(texts[:32])
    one_ms, batch_ms, one_cpu, batch_cpu = [], [], [], []
    same = True
    for _ in range(args.rounds):  # interleaved, so load drift hits both alike
        t0, c0 = time.perf_counter(), time.process_time()
        alone = [clf.classify_text(t) for t in texts]
        one_ms.append((time.perf_counter() - t0) * 1000 / len(texts))
        one_cpu.append((time.process_time() - c0) * 1000 / len(texts))
        t0, c0 = time.perf_counter(), time.process_time()
        batch = clf.classify_batch(texts)
        batch_ms.append((time.perf_counter() - t0) * 1000 / len(texts))
        batch_cpu.append((time.process_time() - c0) * 1000 / len(texts))
        same &= all(
            (a.classification.route, a.classification.status) == (b.classification.route, b.classification.status)
            for a, b in zip(alone, batch, strict=True)
        )
    one, many = statistics.median(one_ms), statistics.median(batch_ms)
    one_c, many_c = statistics.median(one_cpu), statistics.median(batch_cpu)
    print(f"\n| {enc.name}, {len(texts)} queries | ms per query, wall | CPU ms per query |")
    print("|---|---|---|")
    print(f"| one by one (classify_text) | {one:.2f} | {one_c:.2f} |")
    print(f"| batched (classify_batch) | {many:.2f} | {many_c:.2f} |")
    print(f"| throughput ratio | {one / many:.2f}x | {one_c / many_c:.2f}x |")
    print(f"| identical decisions | {same} | |")
    print(f"(median of {args.rounds} interleaved rounds; CPU time counts every thread of the process)")
    single, single_cpu = [], []
    for q in queries(args.p50_queries):
        t0, c0 = time.perf_counter(), time.process_time()
        clf.classify_text(q)
        single.append((time.perf_counter() - t0) * 1000)
        single_cpu.append((time.process_time() - c0) * 1000)
    print(f"\none query in process: p50 {statistics.median(single):.2f} ms wall, "
          f"{statistics.median(single_cpu):.2f} ms CPU, over {len(single)} queries")  # fmt: skip
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
