"""CLINC150: risk-controlled thresholds, out-of-scope AUROC and accuracy at the tuned threshold.

Same protocol as bench/routing_accuracy.py (k=10 examples per route from `pool` with
random.Random(f"{seed}:{route}"), the description as one more item, tuned on `val` only,
reported on `test`, seeds 0-4), for these embedded scorers on the same vectors:
centroid, logistic regression (C=10), late interaction, and late
interaction with the 100 out-of-scope `pool` rows as negatives.

For each route set (intent150, domain10) and scorer it prints, as the mean over seeds:

* OOS AUROC on test: how well the top confidence ranks in-scope rows above out-of-scope ones
  (Mann-Whitney, ties counted half);
* overall acc@t on test at the balanced threshold (`fit()` default);
* the coverage ceiling: the largest share of test rows that any cut of the top score
  auto-routes with at most CAP misrouted among them (an oracle: no certified cut can do better);
* risk control: `fit(max_misroute=CAP, risk_confidence=0.95, oos_share=S)` on val, then on test
  the coverage (share auto-routed) and the misroute rate among auto-routed rows (in-scope and
  out-of-scope together) per seed, and whether the cap held on every seed. S is `none` (the
  guarantee assumes val's mix of out-of-scope rows) and/or a stated worst-case share.

Note the validation split has 3 % out-of-scope rows and the test split 18 %: the plain guarantee
assumes validation rows and traffic come from one distribution, which this split breaks; with
`--oos-shares 0.2` each class is bounded on its own rows (see jeeves_router.classify.risk).

Run from the repository root:
`python bench/routing_risk.py [--seeds 5] [--cap 0.02] [--oos-shares none,0.2] [--levels intent150]
[--encoder mpnet] [--late-options '{"token_weight": 5}'] [--cache /tmp/vectors.pkl]`.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from routing_accuracy import DATA, OOS, CachedEncoder, auroc, labelled, level_routes, rows, train_routes

from jeeves_router.classify.embedding import EmbeddingClassifier, MiniLMEncoder, MPNetEncoder
from jeeves_router.errors import UsageError


def ceiling(top_feature: np.ndarray, correct: np.ndarray, cap: float) -> float:
    """The largest test coverage of any cut whose test misroute rate is within ``cap`` (an oracle)."""
    order = np.argsort(-top_feature, kind="stable")
    wrong = np.cumsum(~correct[order])
    n = np.arange(1, len(order) + 1)
    ok = np.flatnonzero(wrong / n <= cap)
    return float((ok.max() + 1) / len(order)) if len(ok) else 0.0


def one_run(enc: Any, routes: Any, val: Any, test: Any, scorer: str, options: dict[str, Any], negatives: Any,
            cap: float, shares: list[float | None]) -> dict[str, float]:  # fmt: skip
    clf = EmbeddingClassifier(routes, encoder=enc, scorer=scorer, scorer_options=options, negatives=negatives)
    clf.fit(val[0], val[1])
    results = clf.classify_batch(test[0])
    gold = np.asarray(test[1])
    top = np.asarray([r.scores[0][0] for r in results])
    conf = np.asarray([r.scores[0][1] for r in results])
    accepted = conf >= (clf.threshold or 0.0)
    decided = np.where(accepted, top, OOS)
    # The raw top-route feature orders rows as the certified cut does (the calibration is monotone).
    _, vectors, tokens = clf._encode(test[0])
    features = clf.scorer.features(clf.scorer.scores(vectors, tokens, None, **clf._texts(test[0])))
    top_feature = features.max(axis=1)
    names = np.asarray(clf.route_names)
    right = names[features.argmax(axis=1)] == gold
    out = {"auroc": auroc(conf, gold != OOS), "overall": float((decided == gold).mean()),
           "ceiling": ceiling(top_feature, right, cap)}  # fmt: skip
    for share in shares:
        tag = "exch" if share is None else f"{share:g}"
        try:
            report = clf.fit(val[0], val[1], max_misroute=cap, risk_confidence=0.95, oos_share=share)
        except UsageError:
            out.update({f"coverage@{tag}": 0.0, f"misroute@{tag}": 0.0})
            continue
        assert report.risk is not None
        taken = top_feature >= report.risk.cut
        out[f"coverage@{tag}"] = float(taken.mean())
        out[f"misroute@{tag}"] = float((taken & ~right).sum() / max(1, taken.sum()))
    return out


def row(level: str, name: str, runs: list[dict[str, float]], cap: float, tag: str) -> str:
    """One table row: means over seeds; risk figures over the seeds where a cut was certified."""
    cov, mis = f"coverage@{tag}", f"misroute@{tag}"
    head = f"| {level} | {name} | {'same as val' if tag == 'exch' else tag} "
    mean = {k: float(np.mean([r[k] for r in runs])) for k in ("auroc", "overall", "ceiling")}
    head += f"| {mean['auroc']:.3f} | {mean['overall']:.3f} | {mean['ceiling']:.3f} "
    certified = [r for r in runs if r[cov] > 0]
    if not certified:
        return head + f"| 0 of {len(runs)} | - | - | - |"
    held = sum(r[mis] <= cap for r in certified)
    per_seed = " ".join(f"{r[mis]:.4f}" if r[cov] > 0 else "-" for r in runs)
    return head + (
        f"| {len(certified)} of {len(runs)} | {np.mean([r[cov] for r in certified]):.3f} "
        f"({min(r[cov] for r in certified):.3f}-{max(r[cov] for r in certified):.3f}) | {per_seed} "
        f"| {held} of {len(certified)} |"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--cap", type=float, default=0.02)
    ap.add_argument("--levels", default="intent150,domain10")
    ap.add_argument("--oos-shares", default="none,0.2", help="comma list: none (the val mix) and/or shares")
    ap.add_argument("--scorers", default="", help="comma list of row names to run (default: all)")
    ap.add_argument("--encoder", choices=["minilm", "mpnet"], default="minilm")
    ap.add_argument(
        "--late-options", type=json.loads, default={}, help='JSON options of the late rows, e.g. {"token_weight": 5}'
    )
    ap.add_argument("--cache", type=Path, help="pickle of encoder vectors kept between runs (e.g. under /tmp)")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    if not DATA.is_dir():
        sys.exit(f"CLINC150 data not found at {DATA}")
    print(f"start: load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}", file=sys.stderr)
    pool, val_rows, test_rows = rows("pool"), rows("val"), rows("test")
    enc = CachedEncoder(MPNetEncoder() if args.encoder == "mpnet" else MiniLMEncoder(intra_op_threads=0))
    if args.cache:
        enc.load(args.cache)
    oos_pool = [r["text"] for r in pool if r["route"] == OOS]
    t0 = time.perf_counter()
    enc.encode_tokens([r["text"] for r in val_rows + test_rows] + oos_pool)
    print(f"encoded val+test in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    if args.cache:
        enc.save(args.cache)
    scorers: dict[str, tuple[str, dict[str, Any], list[str]]] = {
        "centroid": ("centroid", {}, []),
        "logistic regression (C=10)": ("logreg", {"c": 10.0}, []),
        "late interaction": ("late", args.late_options, []),
        "late interaction + pool OOS negatives": ("late", args.late_options, oos_pool),
    }
    if args.scorers:
        scorers = {k: v for k, v in scorers.items() if k.split(" (")[0] in args.scorers.split(",")}
    shares = [None if x == "none" else float(x) for x in args.oos_shares.split(",")]
    table: dict[tuple[str, str], list[dict[str, float]]] = {}
    for level in args.levels.split(","):
        _, key = level_routes(level)
        val, test = labelled(val_rows, key), labelled(test_rows, key)
        for name, (scorer, options, negatives) in scorers.items():
            t0 = time.perf_counter()
            runs = [one_run(enc, train_routes(level, 10, seed, pool), val, test, scorer, options, negatives, args.cap,
                            shares)
                    for seed in range(args.seeds)]  # fmt: skip
            table[(level, name)] = runs
            print(f"{level} {name}: {runs} ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    print(f"\nCLINC150 test, k=10, mean of {args.seeds} seeds, encoder {enc.name}, late options {args.late_options}; "
          f"risk cap {args.cap} "
          f"(confidence 0.95), tuned on val\n")  # fmt: skip
    print("| route set | scorer | OOS share certified for | OOS AUROC | overall acc@t | coverage ceiling at cap "
          "| seeds certified | coverage (mean, min-max) | test misroute among auto-routed, seeds 0-4 "
          "| cap held |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    for (level, name), runs in table.items():
        for share in shares:
            print(row(level, name, runs, args.cap, "exch" if share is None else f"{share:g}"))
    print(f"\nend: load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
