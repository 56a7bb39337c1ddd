"""SmolLM2 as a router, offline: plain, few-shot and constrained replies, and the cascade.

Data: CLINC150 domain10 (``../shared/data/routing/clinc150/`` from the project root, never
copied here). Two disjoint slices of in-scope ``val`` rows, drawn with ``random.Random(0)``:
``eval`` (300 rows, reported) and ``tune`` (300 rows, where the cascade's acceptance
threshold and the embedded router's calibration are chosen).

Classifiers (all on the same 10 routes: name, description, first 3 utterances in the prompt):

* LLM, plain: the default two-line text prompt.
* LLM, few-shot: plus one example user/assistant turn per route.
* LLM, constrained: the JSON schema (route enum, confidence in [0, 1]) enforced by a
  llama.cpp grammar, with and without the few-shot turns.
* Embedded: ``EmbeddingClassifier`` (MiniLM, centroid of the 10 utterances + description).
* Cascade: embedded first; below the tuned threshold, SmolLM2 (constrained + few-shot)
  with the embedded top-3 as hints, its reply restricted to those hints
  (``restrict_to_hints=True``).

Well-formed = the first reply parses to a declared route with a valid confidence (no
format retries). Usage: ``python bench/local_llm.py [--rows 300] [--threads 1]``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from jeeves_router.classify.cascade import CascadeClassifier
from jeeves_router.classify.embedding import EmbeddingClassifier
from jeeves_router.classify.llm import LLMClassifier
from jeeves_router.classify.types import Classifier, ClassifyRequest, ClassifyResult, RouteSpec
from jeeves_router.models.llamacpp import LlamaCppModel

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "routing" / "clinc150"
PROMPT_EXAMPLES = 3
MAX_MODEL_SHARE = 0.30
MAX_TOKENS = 24  # a two-line or JSON reply needs about 15 tokens


def load_routes() -> tuple[tuple[RouteSpec, ...], tuple[RouteSpec, ...]]:
    """(routes for the LLM prompt, routes for the embedded router)."""
    raw = json.loads((DATA / "routes_domain10.json").read_text())["routes"]
    llm = tuple(RouteSpec(r["name"], r["description"], tuple(r["utterances"][:PROMPT_EXAMPLES])) for r in raw)
    emb = tuple(RouteSpec(r["name"], r["description"], tuple(r["utterances"])) for r in raw)
    return llm, emb


def load_slices(rows: int) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """Disjoint (eval, tune) slices of in-scope val rows."""
    lines = (DATA / "val.jsonl").read_text().splitlines()
    data = [json.loads(x) for x in lines if x.strip()]
    inscope = [d for d in data if d["route"] != "oos"]
    random.Random(0).shuffle(inscope)
    return inscope[:rows], inscope[rows : 2 * rows]


async def run(
    classifier: Classifier, rows: Sequence[dict[str, str]], routes: tuple[RouteSpec, ...]
) -> tuple[list[ClassifyResult], float]:
    """Classify every row in turn: (results, median milliseconds per request)."""
    out, times = [], []
    for row in rows:
        start = time.perf_counter()
        out.append(await classifier.classify(ClassifyRequest(row["text"], routes)))
        times.append((time.perf_counter() - start) * 1000)
    return out, statistics.median(times)


def score(results: Sequence[ClassifyResult], rows: Sequence[dict[str, str]]) -> tuple[float, float]:
    """(well-formed rate, accuracy)."""
    ok = sum(r.classification.ok for r in results)
    right = sum(r.classification.route == row["route"] for r, row in zip(results, rows, strict=True))
    return ok / len(rows), right / len(rows)


def smol(model: LlamaCppModel, **options: Any) -> LLMClassifier:
    """An LLM classifier on SmolLM2 that reads the first reply only (no format retries)."""
    return LLMClassifier(model, max_format_retries=0, max_tokens=MAX_TOKENS, **options)


def pick_threshold(
    confs: Sequence[float], emb_right: Sequence[bool], llm_right: dict[int, bool]
) -> tuple[float, float, float]:
    """The threshold maximising tune accuracy with a model share under the cap: (t, acc, share)."""
    n = len(confs)
    best = (0.0, sum(emb_right) / n, 0.0)  # 0.0: never ask the model
    for t in sorted(set(confs)):
        asked = [i for i in range(n) if confs[i] < t]
        share = len(asked) / n
        if share > MAX_MODEL_SHARE or any(i not in llm_right for i in asked):
            continue
        acc = sum(llm_right[i] if confs[i] < t else emb_right[i] for i in range(n)) / n
        if acc > best[1] or (acc == best[1] and share < best[2]):
            best = (t, acc, share)
    return best


Row = tuple[str, str, str, str, str]


async def bench_cascade(
    model: LlamaCppModel, eval_rows: list[dict[str, str]], tune_rows: list[dict[str, str]]
) -> tuple[list[Row], str]:
    """The embedded router alone and the cascade: (table rows, verdict line)."""
    llm_routes, emb_routes = load_routes()
    emb = EmbeddingClassifier(emb_routes)
    emb.fit([r["text"] for r in tune_rows], [r["route"] for r in tune_rows])
    emb.threshold = None
    emb_tune = emb.classify_batch([r["text"] for r in tune_rows])
    emb_eval, emb_ms = await run(emb, eval_rows, emb_routes)
    wf, emb_acc = score(emb_eval, eval_rows)
    rows: list[Row] = [("Embedded (MiniLM centroid)", f"{wf:.1%}", f"{emb_acc:.1%}", "0%", f"{emb_ms:.1f} ms")]
    print(f"embedded: accuracy {emb_acc:.1%}", flush=True)

    # Tune on the tune slice: the LLM answers only the least confident rows the cap allows.
    second = smol(model, constrained=True, few_shot=1, restrict_to_hints=True)
    confs = [r.classification.confidence for r in emb_tune]
    emb_right = [r.classification.route == row["route"] for r, row in zip(emb_tune, tune_rows, strict=True)]
    order = sorted(range(len(tune_rows)), key=lambda i: confs[i])[: int(MAX_MODEL_SHARE * len(tune_rows)) + 1]
    llm_right: dict[int, bool] = {}
    for i in order:
        hints = tuple(name for name, _ in emb_tune[i].scores[:3])
        res = await second.classify(ClassifyRequest(tune_rows[i]["text"], llm_routes, hints=hints))
        llm_right[i] = res.classification.route == tune_rows[i]["route"]
    asked_right = sum(llm_right.values()) / len(llm_right)
    asked_emb = sum(emb_right[i] for i in llm_right) / len(llm_right)
    threshold, tune_acc, tune_share = pick_threshold(confs, emb_right, llm_right)
    print(
        f"tune: on the {len(llm_right)} least confident rows SmolLM2 (top-3 hints) is right on {asked_right:.1%}, "
        f"the embedded router on {asked_emb:.1%}; embedded overall {sum(emb_right) / len(emb_right):.1%}; "
        f"chosen threshold {threshold:.3f} -> {tune_acc:.1%} with the model on {tune_share:.1%}",
        flush=True,
    )

    cascade = CascadeClassifier(emb, second, accept_above=threshold, max_hints=3)
    cas, cas_ms = await run(cascade, eval_rows, llm_routes)
    wf, cas_acc = score(cas, eval_rows)
    share = sum(r.model_calls for r in cas) / len(eval_rows)
    label = f"Cascade, tuned: SmolLM2 below {threshold:.2f}"
    rows.append((label, f"{wf:.1%}", f"{cas_acc:.1%}", f"{share:.1%}", f"{cas_ms:.1f} ms"))
    print(f"cascade: accuracy {cas_acc:.1%}, model on {share:.1%}", flush=True)
    verdict = "meets" if cas_acc >= emb_acc and share < MAX_MODEL_SHARE else "misses"
    line = (
        f"Cascade vs embedded alone: {cas_acc - emb_acc:+.1%} accuracy, {1 - share:.1%} of model calls saved "
        f"({verdict} the goal: >= embedded accuracy with the model on < {MAX_MODEL_SHARE:.0%})."
    )

    # What the model would change at fixed shares: ask it about the least confident eval rows.
    eval_confs = [r.classification.confidence for r in emb_eval]
    eval_right = [r.classification.route == row["route"] for r, row in zip(emb_eval, eval_rows, strict=True)]
    unsure = sorted(range(len(eval_rows)), key=lambda i: eval_confs[i])[: int(MAX_MODEL_SHARE * len(eval_rows))]
    llm_eval: dict[int, bool] = {}
    llm_ok: dict[int, bool] = {}
    times = []
    for i in unsure:
        hints = tuple(name for name, _ in emb_eval[i].scores[:3])
        start = time.perf_counter()
        res = await second.classify(ClassifyRequest(eval_rows[i]["text"], llm_routes, hints=hints))
        times.append((time.perf_counter() - start) * 1000)
        llm_eval[i] = res.classification.route == eval_rows[i]["route"]
        llm_ok[i] = res.classification.ok
    for fraction in (0.1, 0.2, 0.3):
        asked = set(unsure[: int(fraction * len(eval_rows))])
        acc = sum(llm_eval[i] if i in asked else eval_right[i] for i in range(len(eval_rows))) / len(eval_rows)
        formed = sum(llm_ok[i] if i in asked else emb_eval[i].classification.ok for i in range(len(eval_rows)))
        label = f"Cascade, model on the {fraction:.0%} least sure"
        wf_text = f"{formed / len(eval_rows):.1%}"
        rows.append((label, wf_text, f"{acc:.1%}", f"{len(asked) / len(eval_rows):.1%}", "—"))
    right_llm = sum(llm_eval.values()) / len(llm_eval)
    right_emb = sum(eval_right[i] for i in unsure) / len(unsure)
    line += (
        f"\nOn the {len(unsure)} least sure eval rows SmolLM2 (constrained to the top-3) is right on "
        f"{right_llm:.1%}, the embedded router on {right_emb:.1%} (median {statistics.median(times):.0f} ms/call)."
    )
    return rows, line


async def bench_modes(model: LlamaCppModel, eval_rows: list[dict[str, str]], wanted: Sequence[int]) -> list[Row]:
    """SmolLM2 alone on every row: plain, few-shot, constrained, constrained + few-shot."""
    llm_routes, _ = load_routes()
    modes = [
        ("SmolLM2, plain text", smol(model, constrained=False)),
        ("SmolLM2, few-shot (1/route)", smol(model, constrained=False, few_shot=1)),
        ("SmolLM2, constrained", smol(model, constrained=True)),
        ("SmolLM2, constrained + few-shot", smol(model, constrained=True, few_shot=1)),
    ]
    rows: list[Row] = []
    for label, clf in [modes[i] for i in wanted]:
        results, ms = await run(clf, eval_rows, llm_routes)
        wf, acc = score(results, eval_rows)
        rows.append((label, f"{wf:.1%}", f"{acc:.1%}", "100%", f"{ms:.0f} ms"))
        print(f"{label}: well-formed {wf:.1%}, accuracy {acc:.1%}, median {ms:.0f} ms/request", flush=True)
    return rows


async def main(args: argparse.Namespace) -> None:
    eval_rows, tune_rows = load_slices(args.rows)
    model = LlamaCppModel("smollm2", n_ctx=4096, n_threads=args.threads)
    table: list[Row] = []
    verdict = ""
    if not args.no_cascade:
        table, verdict = await bench_cascade(model, eval_rows, tune_rows)
    table += await bench_modes(model, eval_rows, [int(i) for i in args.modes.split(",") if i.strip()])
    print()
    print(f"CLINC150 domain10, {len(eval_rows)} in-scope val rows (threshold tuned on {len(tune_rows)} other rows)")
    print()
    print("| classifier | well-formed | accuracy | model calls | median time / request |")
    print("|---|---|---|---|---|")
    for row in table:
        print("| " + " | ".join(row) + " |")
    if verdict:
        print()
        print(verdict)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=300)
    parser.add_argument("--modes", default="0,1,2,3", help="which LLM-only modes to run (comma-separated indexes)")
    parser.add_argument("--no-cascade", action="store_true", help="skip the embedded router and the cascade")
    parser.add_argument("--threads", type=int, default=1, help="llama.cpp threads (1 is fastest on a busy 2-core box)")
    anyio.run(main, parser.parse_args())
