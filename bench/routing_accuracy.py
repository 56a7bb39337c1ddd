"""Routing accuracy on CLINC150: jeeves_router's embedded scorers beside semantic-router.

Protocol (same for every router, same vectors):
  * routes: domain10 (10 domains) and intent150 (150 intents) from ../shared/data/routing/clinc150;
  * each route gets k in {0, 5, 10} examples drawn from `pool` with
    random.Random(f"{seed}:{route}").sample, plus its description as one more item;
  * the acceptance threshold is chosen on `val` to maximise (in-scope acc@t + OOS recall@t) / 2
    and applied unchanged to `test`; figures are the mean over seeds 0-4;
  * OOS AUROC: how well the top route's confidence ranks in-scope `test` rows above
    out-of-scope ones (Mann-Whitney, ties counted half), threshold-free.
  * semantic-router 1.1.1 gets the same encoder through a DenseEncoder subclass:
    IndexedRouter(top_k=5, aggregation="mean"), its threshold tuned on its top score.

Run from the repository root: `python bench/routing_accuracy.py [--seeds 5] [--quick]`;
`--cache /tmp/minilm.pkl` keeps the encoder's vectors on disk between runs (never in the
repository: they are derived from the data set).
Needs the `embed` extra and `pip install semantic-router==1.1.1` (optional: its rows are
skipped without it). The data is read from ../shared and never copied into the repository.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import pickle
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from threadpoolctl import threadpool_limits

from jeeves_router.classify.embedding import EmbeddingClassifier, MiniLMEncoder, MPNetEncoder, WordLlamaEncoder
from jeeves_router.classify.embedding.calibration import choose_threshold
from jeeves_router.classify.embedding.encoders import blas_single_thread
from jeeves_router.classify.types import RouteSpec
from jeeves_router.eval import load_routes


def _find_data() -> Path:
    """$CLINC150_DIR, else ``shared/data/routing/clinc150`` beside the repository or a parent of it."""
    env = os.environ.get("CLINC150_DIR")
    if env:
        return Path(env)
    here = Path(__file__).resolve().parents[1]
    for base in here.parents:
        candidate = base / "shared" / "data" / "routing" / "clinc150"
        if candidate.is_dir():
            return candidate
    return here.parent / "shared" / "data" / "routing" / "clinc150"


DATA = _find_data()
OOS = "oos"


class CachedEncoder:
    """Wraps an encoder with a per-run text -> vector cache (same name, same vectors)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.name, self.dim = inner, inner.name, inner.dim
        self.cache: dict[str, np.ndarray] = {}
        self.token_cache: dict[str, np.ndarray] = {}

    def load(self, path: Path) -> None:
        """Read vectors saved by :meth:`save` (ignored when written for another encoder)."""
        if not path.is_file():
            return
        with path.open("rb") as fh:
            saved = pickle.load(fh)  # a local file this script wrote
        if saved.get("name") != self.name:
            return
        for text, (vector, tokens) in saved["data"].items():
            self.cache[text] = vector
            if tokens is not None:
                self.token_cache[text] = tokens

    def save(self, path: Path) -> None:
        """Write every cached text's sentence and token vectors."""
        data = {t: (v, self.token_cache.get(t)) for t, v in self.cache.items()}
        with path.open("wb") as fh:
            pickle.dump({"name": self.name, "dim": self.dim, "data": data}, fh)

    def warm(self, texts: Sequence[str]) -> None:
        todo = sorted({t for t in texts if t not in self.cache})
        if todo:
            for t, v in zip(todo, self.inner.encode(todo), strict=True):
                self.cache[t] = v

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.warm(texts)
        return np.stack([self.cache[t] for t in texts]) if texts else np.zeros((0, self.dim), np.float32)

    def encode_tokens(self, texts: Sequence[str]) -> tuple[np.ndarray, list[np.ndarray]]:
        todo = sorted({t for t in texts if t not in self.token_cache})
        if todo:
            vectors, tokens = self.inner.encode_tokens(todo)
            for t, v, tok in zip(todo, vectors, tokens, strict=True):
                self.cache[t], self.token_cache[t] = v, tok
        return self.encode(texts), [self.token_cache[t] for t in texts]


def rows(split: str) -> list[dict[str, str]]:
    with open(DATA / f"{split}.jsonl", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def level_routes(level: str) -> tuple[list[dict[str, Any]], str]:
    spec = json.loads((DATA / f"routes_{level}.json").read_text(encoding="utf-8"))
    return spec["routes"], ("route" if level == "domain10" else "intent")


def labelled(split_rows: list[dict[str, str]], key: str) -> tuple[list[str], list[str]]:
    return [r["text"] for r in split_rows], [OOS if r["route"] == OOS else r[key] for r in split_rows]


def train_routes(level: str, k: int, seed: int, pool: list[dict[str, str]]) -> list[RouteSpec]:
    routes, key = level_routes(level)
    by_route: dict[str, list[str]] = {r["name"]: [] for r in routes}
    for row in pool:
        if row["route"] != OOS:
            by_route[row[key]].append(row["text"])
    out = []
    for r in routes:
        examples = random.Random(f"{seed}:{r['name']}").sample(by_route[r["name"]], k) if k else []
        out.append(RouteSpec(r["name"], r["description"], tuple(examples)))
    return out


def auroc(scores: np.ndarray, positive: np.ndarray) -> float:
    """Area under the ROC curve of ``scores`` for ``positive`` rows (average ranks for ties)."""
    _, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    ranks = (starts + (counts + 1) / 2)[inverse]
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def figures(top: Sequence[str], conf: np.ndarray, t: float, gold: Sequence[str]) -> dict[str, float]:
    """Closed and at-threshold accuracy, OOS recall, and the OOS AUROC of the top confidence."""
    g = np.asarray(gold)
    p = np.asarray(top)
    accepted = conf >= t
    ins = g != OOS
    decided = np.where(accepted, p, OOS)
    return {
        "closed": float((p[ins] == g[ins]).mean()),
        "in_acc": float(((p == g) & accepted)[ins].mean()),
        "oos_recall": float((~accepted)[~ins].mean()),
        "overall": float((decided == g).mean()),
        "auroc": auroc(np.asarray(conf, dtype=np.float64), ins),
    }


def run_ours(
    enc: CachedEncoder,
    routes: list[RouteSpec],
    val: tuple[list[str], list[str]],
    test: tuple[list[str], list[str]],
    scorer: str,
    options: dict[str, Any],
    negatives: Sequence[str] = (),
) -> dict[str, float]:
    clf = EmbeddingClassifier(routes, encoder=enc, scorer=scorer, scorer_options=options, negatives=negatives)
    clf.fit(val[0], val[1])
    results = clf.classify_batch(test[0])
    top = [r.scores[0][0] for r in results]
    conf = np.asarray([r.scores[0][1] for r in results])
    return figures(top, conf, clf.threshold or 0.0, test[1])


def run_ours_tuned_c(enc: CachedEncoder, routes: list[RouteSpec], val: Any, test: Any) -> dict[str, float]:
    """Logistic regression with C picked on val (by the val objective at its own threshold)."""
    best: tuple[float, EmbeddingClassifier | None] = (-1.0, None)
    for c in (1.0, 10.0, 100.0):
        clf = EmbeddingClassifier(routes, encoder=enc, scorer="logreg", scorer_options={"c": c})
        rep = clf.fit(val[0], val[1])
        obj = (rep.threshold.in_scope_accuracy + rep.threshold.oos_recall) / 2
        if obj > best[0]:
            best = (obj, clf)
    clf = best[1]
    assert clf is not None
    results = clf.classify_batch(test[0])
    return figures([r.scores[0][0] for r in results], np.asarray([r.scores[0][1] for r in results]),
                   clf.threshold or 0.0, test[1])  # fmt: skip


def make_sr(enc: CachedEncoder, routes: list[RouteSpec]) -> Any:
    from semantic_router import Route
    from semantic_router.encoders import DenseEncoder
    from semantic_router.routers import IndexedRouter

    class Plugged(DenseEncoder):  # type: ignore[misc]
        def __call__(self, docs: list[Any]) -> list[list[float]]:
            return enc.encode([str(d) for d in docs]).tolist()  # type: ignore[no-any-return]

    sr_routes = [Route(name=r.name, utterances=[*r.examples, r.description]) for r in routes]
    return IndexedRouter(encoder=Plugged(name=enc.name), routes=sr_routes, top_k=5, aggregation="mean")


def sr_top(router: Any, texts: list[str]) -> tuple[list[str], np.ndarray]:
    async def go() -> list[dict[str, float]]:
        return await router._scores_many(texts)

    with threadpool_limits(1, user_api="blas"):
        scored = asyncio.run(go())
    top = [max(s, key=s.__getitem__) if s else OOS for s in scored]
    return top, np.asarray([max(s.values()) if s else 0.0 for s in scored])


def run_sr(enc: CachedEncoder, routes: list[RouteSpec], val: Any, test: Any) -> dict[str, float]:
    router = make_sr(enc, routes)
    vtop, vconf = sr_top(router, val[0])
    gold_v = np.asarray(val[1])
    t = choose_threshold(vconf, np.asarray(vtop) == gold_v, gold_v != OOS).threshold
    ttop, tconf = sr_top(router, test[0])
    return figures(ttop, tconf, t, test[1])


def interleaved_p50(fns: dict[str, Callable[[str], Any]], queries: Sequence[str], rounds: int = 6) -> dict[str, float]:
    """Median ms per query for each function, measured in alternating blocks of the queries.

    The machine's load drifts; running every contestant on each block in turn spreads that
    drift evenly instead of charging it to whoever ran during a busy spell.
    """
    for fn in fns.values():
        for q in queries[:10]:
            fn(q)
    times: dict[str, list[float]] = {name: [] for name in fns}
    block = max(1, len(queries) // rounds)
    for start in range(0, len(queries), block):
        for name, fn in fns.items():
            for q in queries[start : start + block]:
                t0 = time.perf_counter()
                fn(q)
                times[name].append((time.perf_counter() - t0) * 1000)
    return {name: statistics.median(ts) for name, ts in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="intent150 k=10 only")
    ap.add_argument("--latency-queries", type=int, default=300)
    ap.add_argument("--latency-only", action="store_true", help="skip the accuracy runs")
    ap.add_argument("--latency-threads", type=int, default=2, help="onnxruntime threads for the latency runs")
    ap.add_argument("--encoder", choices=["minilm", "mpnet", "wordllama"], default="minilm")
    ap.add_argument("--levels", default="intent150,domain10", help="route sets of the accuracy runs")
    ap.add_argument("--ks", default="0,5,10", help="examples per route of the accuracy runs")
    ap.add_argument("--skip", default="", help="comma-separated router names (or prefixes) to leave out")
    ap.add_argument("--cache", type=Path, help="pickle of encoder vectors kept between runs (e.g. under /tmp)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if not DATA.is_dir():
        sys.exit(f"CLINC150 data not found at {DATA}")
    try:
        import semantic_router  # noqa: F401

        have_sr = True
    except ImportError:
        have_sr = False
        print("semantic-router not installed: its rows are skipped", file=sys.stderr)
    pool, val_rows, test_rows = rows("pool"), rows("val"), rows("test")

    def new_encoder(threads: int) -> Any:
        if args.encoder == "mpnet":
            return MPNetEncoder(intra_op_threads=threads)
        return WordLlamaEncoder() if args.encoder == "wordllama" else MiniLMEncoder(intra_op_threads=threads)

    enc = CachedEncoder(new_encoder(0))
    if args.cache:
        enc.load(args.cache)
    if not args.latency_only:
        t0 = time.perf_counter()
        texts = [r["text"] for r in val_rows + test_rows]
        enc.encode_tokens(texts) if hasattr(enc.inner, "encode_tokens") else enc.warm(texts)
        print(f"encoded val+test in {time.perf_counter() - t0:.0f} s", file=sys.stderr)

    routers: dict[str, Callable[..., dict[str, float]]] = {
        "centroid": lambda e, r, v, t: run_ours(e, r, v, t, "centroid", {}),
        "nearest example": lambda e, r, v, t: run_ours(e, r, v, t, "nearest", {}),
        "logistic regression (C=10)": lambda e, r, v, t: run_ours(e, r, v, t, "logreg", {"c": 10.0}),
        "logistic regression (C tuned on val)": run_ours_tuned_c,
    }
    oos_pool = [r["text"] for r in pool if r["route"] == OOS]
    if hasattr(enc.inner, "encode_tokens"):
        old = {"token_weight": 5.0, "lexical_weight": 0.0, "pooled": False, "prior_tokens": 0.0}
        routers["late interaction, previous settings"] = lambda e, r, v, t: run_ours(e, r, v, t, "late", old)
        routers["late interaction, previous settings + pool OOS rows as negatives"] = lambda e, r, v, t: run_ours(
            e, r, v, t, "late", old, oos_pool
        )
        routers["late interaction (default)"] = lambda e, r, v, t: run_ours(e, r, v, t, "late", {})
        routers["late interaction (default) + pool OOS rows as negatives"] = lambda e, r, v, t: run_ours(
            e, r, v, t, "late", {}, oos_pool
        )
    if have_sr:
        routers = {"semantic-router 1.1.1 IndexedRouter (top_k=5, mean)": run_sr, **routers}
    skip = tuple(x.strip() for x in args.skip.split(",") if x.strip())
    routers = {name: fn for name, fn in routers.items() if not name.startswith(skip)} if skip else routers
    grid = (
        []
        if args.latency_only
        else [("intent150", 10)]
        if args.quick
        else [(lv, int(k)) for lv in args.levels.split(",") for k in args.ks.split(",")]
    )
    results: dict[tuple[str, str, int], dict[str, float]] = {}
    for level, k in grid:
        _, key = level_routes(level)
        val, test = labelled(val_rows, key), labelled(test_rows, key)
        for name, fn in routers.items():
            per_seed = []
            t0 = time.perf_counter()
            for seed in range(args.seeds):
                per_seed.append(fn(enc, train_routes(level, k, seed, pool), val, test))
            results[(name, level, k)] = {m: float(np.mean([s[m] for s in per_seed])) for m in per_seed[0]}
            print(f"{level} k={k} {name}: {results[(name, level, k)]} ({time.perf_counter() - t0:.0f} s)",
                  file=sys.stderr)  # fmt: skip

    if args.cache:
        enc.save(args.cache)

    # Latency: one query end to end (encode + score), intent150 k=10 seed 0, fresh encoder.
    lat_enc = new_encoder(args.latency_threads)
    print(f"latency: onnxruntime intra-op threads = {args.latency_threads}", file=sys.stderr)
    routes = train_routes("intent150", 10, 0, pool)
    queries = [r["text"] for r in test_rows[: args.latency_queries]]
    lat: dict[str, tuple[float, float]] = {}
    one_thread = new_encoder(1)
    contestants: dict[str, Callable[[str], Any]] = {
        "encoder only": lambda q: lat_enc.encode([q]),
        "encoder only, 1 onnxruntime thread": lambda q: one_thread.encode([q]),
    }
    default_blas: dict[str, Callable[[str], Any]] = {}
    scoring: dict[str, EmbeddingClassifier] = {}
    for name, scorer, negs in (
        ("centroid", "centroid", []),
        ("nearest example", "nearest", []),
        ("logistic regression (C=10)", "logreg", []),
        ("late interaction (default)", "late", []),
        ("late interaction (default) + pool OOS rows as negatives", "late", oos_pool),
    ):
        clf = EmbeddingClassifier(routes, encoder=lat_enc, scorer=scorer, blas_one_thread=True, negatives=negs)
        scoring[name] = clf
        free = EmbeddingClassifier.from_dict(clf.to_dict(), encoder=lat_enc)
        free.blas_one_thread = False
        contestants[name], default_blas[name] = clf.classify_text, free.classify_text
    if have_sr:
        sr = make_sr(_NoCache(lat_enc), routes)  # type: ignore[arg-type]
        sr_name = "semantic-router 1.1.1 IndexedRouter (top_k=5, mean)"
        contestants[sr_name], default_blas[sr_name] = sr, sr
    with blas_single_thread():  # held once around the run: the classifiers' own holds nest cheaply
        one = interleaved_p50(contestants, queries)
    other = interleaved_p50(default_blas, queries)
    for name, ms in one.items():
        lat[name] = (ms, other.get(name, ms))

    print_tables(results, lat, routers, grid, args.seeds, enc.name)
    print_scoring_cost(scoring, queries)
    desk = load_routes(Path(__file__).resolve().parents[1] / "jeeves_router" / "data" / "desk_routes.json")
    anyio.run(offload_report, lat_enc, desk)


async def offload_report(encoder: Any, specs: Sequence[RouteSpec]) -> None:
    """Async classify inline vs in a worker thread: per-call p50, and 100 concurrent calls."""
    from jeeves_router.classify.embedding import HashingEncoder
    from jeeves_router.classify.types import ClassifyRequest

    queries = [f"where is my parcel number {i}" for i in range(200)]
    print("\nasync classify, support-desk routes: p50 per call / 100 concurrent calls: total, worst event-loop stall\n")
    print("| encoder | offload | p50 | 100 concurrent: total | worst loop stall |")
    print("|---|---|---|---|---|")
    for enc in (HashingEncoder(), encoder):
        for offload in (False, True):
            clf = EmbeddingClassifier(specs, encoder=enc, offload=offload)
            times = []
            for q in queries:
                start = time.perf_counter()
                await clf.classify(ClassifyRequest(q, tuple(specs)))
                times.append((time.perf_counter() - start) * 1000)
            lags: list[float] = []
            stop = anyio.Event()

            async def ticker(done: anyio.Event = stop, lag: list[float] = lags) -> None:
                while not done.is_set():
                    t = time.perf_counter()
                    await anyio.sleep(0.001)
                    lag.append((time.perf_counter() - t - 0.001) * 1000)

            start = time.perf_counter()
            async with anyio.create_task_group() as tg:
                tg.start_soon(ticker)
                async with anyio.create_task_group() as inner:
                    for q in queries[:100]:
                        inner.start_soon(clf.classify, ClassifyRequest(q, tuple(specs)))
                stop.set()
            total = (time.perf_counter() - start) * 1000
            print(f"| {enc.name} | {'thread' if offload else 'inline'} | {statistics.median(times):.2f} ms "
                  f"| {total:.0f} ms | {max(lags):.1f} ms |")  # fmt: skip


def print_scoring_cost(classifiers: dict[str, EmbeddingClassifier], queries: Sequence[str]) -> None:
    """CPU ms per query spent after the encoder (scoring, calibration, ranking), interleaved.

    Each query is encoded once up front; every classifier then decides it from the same
    vectors, in turn, so load drift is shared. CPU time of this process, BLAS on one thread.
    """
    encoded = {name: clf._encode(list(queries)) for name, clf in classifiers.items()}
    cpu: dict[str, float] = dict.fromkeys(classifiers, 0.0)
    with blas_single_thread():
        for i, q in enumerate(queries):
            for name, clf in classifiers.items():
                _, sentence, tokens = encoded[name]
                toks = None if tokens is None else [tokens[i]]
                t0 = time.process_time()
                clf._results(sentence[i : i + 1], None, toks, [q])
                cpu[name] += time.process_time() - t0
    print(f"\nCPU per query after the encoder (intent150 k=10, {len(queries)} queries, one BLAS thread):\n")
    print("| scorer | ms/query beyond the encoder |")
    print("|---|---|")
    for name, total in cpu.items():
        print(f"| {name} | {total * 1000 / len(queries):.3f} |")


class _NoCache:
    def __init__(self, inner: Any) -> None:
        self.inner, self.name, self.dim = inner, inner.name, inner.dim

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return self.inner.encode(list(texts))  # type: ignore[no-any-return]


def print_tables(results: dict[Any, dict[str, float]], lat: dict[str, tuple[float, float]], routers: dict[str, Any],
                 grid: list[tuple[str, int]], seeds: int, encoder: str) -> None:  # fmt: skip
    print(f"\nCLINC150 test, mean of {seeds} seeds, encoder {encoder}, threshold tuned on val\n")
    print("| router (same vectors) | intent150 k=10: closed acc / in-scope acc@t / OOS recall@t / overall acc@t "
          "/ OOS AUROC | domain10 k=10: the same | 1-query p50, BLAS 1 thread / default |")  # fmt: skip
    print("|---|---|---|---|")
    for name in routers:
        cells = []
        for level in ("intent150", "domain10"):
            r = results.get((name, level, 10))
            cells.append(f"{r['closed']:.3f} / {r['in_acc']:.3f} / {r['oos_recall']:.3f} / {r['overall']:.3f} / "
                         f"{r['auroc']:.3f}" if r else "-")  # fmt: skip
        lt = lat.get(name)
        c = f"{lt[0]:.2f} ms / {lt[1]:.2f} ms" if lt else "-"
        print(f"| {name} | {cells[0]} | {cells[1]} | {c} |")
    enc_only = lat.get("encoder only")
    if enc_only:
        print(f"| (encoder alone) | | | {enc_only[0]:.2f} ms |")
    enc_one = lat.get("encoder only, 1 onnxruntime thread")
    if enc_one:
        print(f"| (encoder alone, 1 onnxruntime thread) | | | {enc_one[0]:.2f} ms |")
    levels = sorted({lv for lv, _ in grid}, reverse=True)
    ks = sorted({k for _, k in grid})
    if len(grid) > 1:
        print("\nOverall accuracy at the tuned threshold, by examples per route (k):\n")
        print("| router | " + " | ".join(f"{lv} k={k}" for lv in levels for k in ks) + " |")
        print("|---|" + "---|" * (len(levels) * len(ks)))
        for name in routers:
            cells = [results.get((name, lv, k)) for lv in levels for k in ks]
            print(f"| {name} | " + " | ".join(f"{c['overall']:.3f}" if c else "-" for c in cells) + " |")


if __name__ == "__main__":
    main()
