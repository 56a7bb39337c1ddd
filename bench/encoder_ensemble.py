"""Two encoders' route probabilities averaged: does an ensemble of MiniLM and MPNet route better?

A research measurement for issue 18's accuracy and risk goals, not a feature: it builds the `late`
classifier (the default scorer) on MiniLM and on MPNet from the same routes, fits each on `val`,
and combines their per-route probabilities on `test` (the mean, the geometric mean, and 0.3 MiniLM +
0.7 MPNet), then takes the top route and its combined probability as the decision. The weights
were fixed before the run, not tuned.

Protocol of bench/routing_accuracy.py (imported, not copied): k=10 examples per route from `pool`
plus the description, seeds 0-4, thresholds chosen on `val` (the balanced rule `fit()` uses, on the
combined probabilities), figures on `test`; with and without the pool's out-of-scope rows as
negatives. MPNet's `late` takes `token_weight=5`, as chosen for it on `val` (README). Per row
(mean over seeds): overall acc@t, OOS AUROC of the top probability, the coverage ceiling at 2 %
misroutes (bench/routing_risk.py's oracle), and at a 70 % coverage cut the misroute rate and how
many of those misroutes are out-of-scope requests (the rest are in-scope rows sent to the wrong
route).

Needs the `mpnet` extra. Run from the repository root:
`python bench/encoder_ensemble.py [--levels intent150] [--seeds 5] [--cache-dir /tmp]`.
The data is read from ../shared; vector caches go to --cache-dir, never the repository.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import routing_accuracy as ra
from routing_risk import ceiling

from jeeves_router.classify.embedding import EmbeddingClassifier, MiniLMEncoder, MPNetEncoder
from jeeves_router.classify.embedding.calibration import choose_threshold

Matrix = np.ndarray
COMBINE: dict[str, Callable[[Matrix, Matrix], Matrix]] = {
    "MiniLM alone": lambda m, p: m,
    "MPNet alone": lambda m, p: p,
    "mean": lambda m, p: (m + p) / 2,
    "geometric mean": lambda m, p: np.sqrt(m * p),
    "0.3 MiniLM + 0.7 MPNet": lambda m, p: 0.3 * m + 0.7 * p,
}


def probabilities(clf: EmbeddingClassifier, texts: list[str], names: list[str]) -> Matrix:
    """Every route's probability for every text, columns in ``names`` order."""
    col = {n: j for j, n in enumerate(names)}
    out = np.zeros((len(texts), len(names)))
    for i, result in enumerate(clf.classify_batch(texts)):
        for name, p in result.scores:
            out[i, col[name]] = p
    return out


def figures(pv: Matrix, pt: Matrix, names: np.ndarray, gv: np.ndarray, gt: np.ndarray) -> dict[str, float]:
    """Accuracy at the val threshold, AUROC, the 2 % ceiling and the 70 % cut's misroutes on test."""
    top_v, top_t = names[pv.argmax(1)], names[pt.argmax(1)]
    conf_v, conf_t = pv.max(1), pt.max(1)
    t = choose_threshold(conf_v, top_v == gv, gv != ra.OOS).threshold
    out = ra.figures(list(top_t), conf_t, t, list(gt))
    right = (top_t == gt) & (gt != ra.OOS)
    out["ceiling"] = ceiling(conf_t, right, 0.02)
    cut = np.argsort(-conf_t, kind="stable")[: int(0.7 * len(gt))]
    wrong = cut[~right[cut]]
    out["misroute@70%"] = len(wrong) / len(cut)
    out["oos share of those"] = float((gt[wrong] == ra.OOS).mean()) if len(wrong) else 0.0
    return out


def print_table(title: str, rows: dict[str, list[dict[str, float]]]) -> None:
    """One Markdown table: each combination's figures, the mean over seeds."""
    print(f"\n{title} (mean of {len(next(iter(rows.values())))} seeds):")
    print("| combination | overall acc@t | OOS AUROC | ceiling at 2 % | misroute at 70 % coverage | OOS share |")
    print("|---|---|---|---|---|---|")
    for name, per_seed in rows.items():
        mean = {m: float(np.mean([s[m] for s in per_seed])) for m in per_seed[0]}
        print(f"| {name} | {mean['overall']:.3f} | {mean['auroc']:.3f} | {mean['ceiling']:.3f} | "
              f"{mean['misroute@70%']:.3f} | {mean['oos share of those']:.2f} |")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--levels", default="intent150")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--cache-dir", type=Path, help="keep each encoder's vectors here between runs (e.g. /tmp)")
    args = ap.parse_args()
    print(f"start: load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    encoders = {"minilm": ra.CachedEncoder(MiniLMEncoder()), "mpnet": ra.CachedEncoder(MPNetEncoder())}
    options: dict[str, dict[str, float]] = {"minilm": {}, "mpnet": {"token_weight": 5.0}}
    for key, enc in encoders.items():
        if args.cache_dir:
            enc.load(args.cache_dir / f"jeeves_ensemble_{key}.pkl")
    pool, val_rows, test_rows = ra.rows("pool"), ra.rows("val"), ra.rows("test")
    oos_pool = [r["text"] for r in pool if r["route"] == ra.OOS]
    start = time.time()
    for level in args.levels.split(","):
        _, key = ra.level_routes(level)
        val, test = ra.labelled(val_rows, key), ra.labelled(test_rows, key)
        gv, gt = np.asarray(val[1]), np.asarray(test[1])
        for negatives in (True, False):
            rows: dict[str, list[dict[str, float]]] = {name: [] for name in COMBINE}
            for seed in range(args.seeds):
                routes = ra.train_routes(level, 10, seed, pool)
                names = [r.name for r in routes]
                probs = {}
                for enc_key, enc in encoders.items():
                    negs = oos_pool if negatives else ()
                    clf = EmbeddingClassifier(routes, encoder=enc, scorer_options=options[enc_key], negatives=negs,
                                              max_scores=len(routes))  # fmt: skip
                    clf.fit(val[0], val[1])
                    probs[enc_key] = (probabilities(clf, val[0], names), probabilities(clf, test[0], names))
                for name, combine in COMBINE.items():
                    pv = combine(probs["minilm"][0], probs["mpnet"][0])
                    pt = combine(probs["minilm"][1], probs["mpnet"][1])
                    rows[name].append(figures(pv, pt, np.asarray(names), gv, gt))
                print(f"  {level} negatives={negatives} seed {seed} done ({time.time() - start:.0f} s)", flush=True)
            print_table(f"{level}, `late`{' + the pool OOS rows as negatives' if negatives else ''}", rows)
    if args.cache_dir:
        for key, enc in encoders.items():
            enc.save(args.cache_dir / f"jeeves_ensemble_{key}.pkl")
    print(f"end: load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
