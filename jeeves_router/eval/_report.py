"""Measuring a classifier on labelled data: predictions, the report, the misrouted rows."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import anyio
import anyio.to_thread

from .._args import route_specs
from ..architectures.routes import check_classifier_routes
from ..classify.resolve import valid_confidence
from ..classify.types import Classifier, ClassifyRequest, ClassifyResult, RouteSpec, check_classifier, classify_result
from ..errors import UsageError
from ..ids import check_oos_label
from ..policies import check_count
from ._data import LabelledRow

__all__ = [
    "EvaluationError",
    "Prediction",
    "Misrouted",
    "EvalReport",
    "compute_report",
    "evaluate",
    "predict",
    "write_misrouted",
    "risk_coverage_curve",
]


class EvaluationError(UsageError):
    """The classifier under evaluation raised on a row (the message names the row)."""


@dataclass(frozen=True, slots=True)
class Prediction:
    """What a classifier decided for one row.

    Attributes:
        route: The accepted route, or ``None`` when the classification was not ok.
        top_route: The best-ranked route even if it was rejected (for calibration).
        top_confidence: Its confidence.
    """

    route: str | None
    top_route: str | None
    top_confidence: float


@dataclass(frozen=True, slots=True)
class Misrouted:
    """A row whose decision differs from its label."""

    line: int
    text: str
    expected: str
    predicted: str
    confidence: float


@dataclass(frozen=True, slots=True)
class EvalReport:
    """Evaluation figures. Rejected rows count as predicted ``oos_label``.

    Attributes:
        rows: Rows evaluated.
        accuracy: Rows decided right (OOS rows are right when rejected).
        in_scope_accuracy: In-scope rows routed right and accepted.
        macro_f1: Mean F1 over the labels present in the data (OOS included).
        oos_recall: OOS rows rejected (``None`` without OOS rows).
        oos_precision: Rejections that were OOS rows (``None`` without rejections).
        ece: Expected calibration error of the top route's confidence (10 bins).
        labels: Confusion-matrix order (routes, then the OOS label).
        confusion: ``confusion[i][j]`` = rows labelled ``labels[i]`` predicted ``labels[j]``.
        reliability: Per bin: (mean confidence, accuracy, count).
        misrouted: The wrong rows.
        coverage: Share of rows auto-routed (given a route rather than rejected).
        misroute: Share of auto-routed rows whose route was wrong, out-of-scope rows
            included (``None`` when nothing was routed).
        risk_coverage: The curve of (coverage, misroute) when accepting the most confident
            rows first, at coverages 1 %, 2 %, ... 100 % (see :func:`risk_coverage_curve`).
    """

    rows: int
    accuracy: float
    in_scope_accuracy: float
    macro_f1: float
    oos_recall: float | None
    oos_precision: float | None
    ece: float
    labels: tuple[str, ...]
    confusion: tuple[tuple[int, ...], ...]
    reliability: tuple[tuple[float, float, int], ...]
    misrouted: tuple[Misrouted, ...]
    coverage: float = 1.0
    misroute: float | None = None
    risk_coverage: tuple[tuple[float, float], ...] = ()


def _prediction(result: ClassifyResult, names: frozenset[str]) -> Prediction:
    """What a Router would make of ``result``: routed only to a declared route with a valid confidence.

    A route outside ``names`` (another spelling, an invented one) or a confidence that is not
    a finite number in [0, 1] is never dispatched (see
    :func:`~jeeves_router.classify.resolve.resolve_route`), so it counts as a rejection, and as
    a wrong top route with confidence 0 for calibration and risk.
    """
    c = result.classification
    routed = c.ok and isinstance(c.route, str) and c.route in names and valid_confidence(c.confidence)
    top, conf = result.scores[0] if result.scores else (c.route, c.confidence)
    if not (isinstance(top, str) and top in names and valid_confidence(conf)):
        top, conf = (c.route, c.confidence) if routed else (None, 0.0)
    return Prediction(c.route if routed else None, top, float(conf))


def compute_report(
    rows: Sequence[LabelledRow], predictions: Sequence[Prediction], *, oos_label: str = "oos", bins: int = 10
) -> EvalReport:
    """The figures for ``predictions`` against ``rows`` (same order)."""
    if len(rows) != len(predictions) or not rows:
        raise UsageError("compute_report needs one prediction per row and at least one row")
    expected = [r.label for r in rows]
    predicted = [p.route if p.route is not None else oos_label for p in predictions]
    present = sorted({*expected, *predicted} - {oos_label})
    labels = (*present, oos_label)
    idx = {lab: i for i, lab in enumerate(labels)}
    matrix = [[0] * len(labels) for _ in labels]
    for e, p in zip(expected, predicted, strict=True):
        matrix[idx[e]][idx[p]] += 1
    n = len(rows)
    right = sum(e == p for e, p in zip(expected, predicted, strict=True))
    in_scope = [i for i, e in enumerate(expected) if e != oos_label]
    oos = [i for i, e in enumerate(expected) if e == oos_label]
    rejected = [i for i, p in enumerate(predicted) if p == oos_label]
    accepted = [i for i, p in enumerate(predictions) if p.route is not None]
    f1s = []
    for lab in sorted(set(expected)):
        k = idx[lab]
        tp = matrix[k][k]
        fp = sum(matrix[i][k] for i in range(len(labels))) - tp
        fn = sum(matrix[k]) - tp
        f1s.append(2 * tp / (2 * tp + fp + fn) if tp else 0.0)
    rel: list[tuple[float, float, int]] = []
    ece = 0.0
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        members = [
            i
            for i, p in enumerate(predictions)
            if lo <= p.top_confidence < hi or (b == bins - 1 and p.top_confidence == 1.0)
        ]
        if not members:
            rel.append(((lo + hi) / 2, 0.0, 0))
            continue
        conf = sum(predictions[i].top_confidence for i in members) / len(members)
        acc = sum(predictions[i].top_route == expected[i] for i in members) / len(members)
        ece += len(members) / n * abs(acc - conf)
        rel.append((conf, acc, len(members)))
    wrong = tuple(
        Misrouted(rows[i].line, rows[i].text, expected[i], predicted[i], predictions[i].top_confidence)
        for i in range(n)
        if expected[i] != predicted[i]
    )
    return EvalReport(
        rows=n,
        accuracy=right / n,
        in_scope_accuracy=sum(expected[i] == predicted[i] for i in in_scope) / len(in_scope) if in_scope else 0.0,
        macro_f1=sum(f1s) / len(f1s),
        oos_recall=sum(predicted[i] == oos_label for i in oos) / len(oos) if oos else None,
        oos_precision=sum(expected[i] == oos_label for i in rejected) / len(rejected) if rejected else None,
        ece=ece,
        labels=labels,
        confusion=tuple(tuple(r) for r in matrix),
        reliability=tuple(rel),
        misrouted=wrong,
        coverage=(n - len(rejected)) / n,
        misroute=sum(expected[i] != predicted[i] for i in accepted) / len(accepted) if accepted else None,
        risk_coverage=risk_coverage_curve([p.top_confidence for p in predictions],
                                          [p.top_route == e for p, e in zip(predictions, expected, strict=True)]),
    )  # fmt: skip


def risk_coverage_curve(confidence: Sequence[float], correct: Sequence[bool]) -> tuple[tuple[float, float], ...]:
    """(coverage, misroute among accepted) when accepting the most confident rows first.

    One point per coverage of 1 %, 2 %, ... 100 % of the rows; a row is misrouted when its top
    route is wrong (every out-of-scope row is). Ties in confidence are accepted together.
    """
    order = sorted(range(len(confidence)), key=lambda i: -confidence[i])
    if not order:
        return ()
    points: list[tuple[float, float]] = []
    wrong = 0
    taken = 0
    n = len(order)
    for pct in range(1, 101):
        want = max(1, round(pct / 100 * n))
        while taken < want or (taken < n and confidence[order[taken]] == confidence[order[taken - 1]]):
            wrong += not correct[order[taken]]
            taken += 1
        if not points or points[-1][0] != taken / n:
            points.append((taken / n, wrong / taken))
    return tuple(points)


def _checked(classifier: object, routes: object, rows: object, concurrency: object) -> Sequence[RouteSpec]:
    """The routes of :func:`predict`, once its arguments are checked; a UsageError names the first wrong one."""
    specs = route_specs(routes, owner="evaluate")
    if not specs:
        raise UsageError("evaluate needs at least one route: routes=[RouteSpec('billing', 'payments')]")
    if not callable(getattr(classifier, "classify_batch", None)):
        check_classifier(classifier, "classifier")
    # a fixed route table (EmbeddingClassifier) must be the routes given, or only the shared ones are scored
    check_classifier_routes(classifier, specs, owner="evaluate", exact=True, protocol=False)
    if (
        isinstance(rows, (str, bytes))
        or not isinstance(rows, Sequence)
        or not all(isinstance(r, LabelledRow) for r in rows)
    ):
        raise UsageError(
            f"rows must be a list of LabelledRow(text, label, line), as load_labelled(path) reads, got {rows!r:.80}"
        )
    check_count("concurrency", concurrency, 1)
    return specs


async def evaluate(
    classifier: Classifier,
    routes: Sequence[RouteSpec],
    rows: Sequence[LabelledRow],
    *,
    oos_label: str = "oos",
    concurrency: int = 4,
    on_progress: Callable[[int], None] | None = None,
) -> EvalReport:
    """Classify every row (see :func:`predict`) and compute the report.

    Args:
        classifier: Any classifier.
        routes: The routes offered to it.
        rows: The labelled rows.
        oos_label: The label of out-of-scope rows.
        concurrency: Parallel ``classify`` calls for classifiers without batching.
        on_progress: Called with the number of rows just finished.

    Raises:
        UsageError: When a route has the name of ``oos_label``, for no routes or routes that
            are not RouteSpecs, rows that are not :class:`LabelledRow` objects, a classifier
            without ``async def classify`` (or ``classify_batch``), or a ``concurrency`` < 1.
        EvaluationError: When the classifier raises on a row, or returns no ClassifyResult.
    """
    routes = _checked(classifier, routes, rows, concurrency)
    check_oos_label(oos_label, [r.name for r in routes])
    preds = await predict(classifier, routes, rows, concurrency=concurrency, on_progress=on_progress)
    return compute_report(rows, preds, oos_label=oos_label)


async def predict(
    classifier: Classifier,
    routes: Sequence[RouteSpec],
    rows: Sequence[LabelledRow],
    *,
    concurrency: int = 4,
    on_progress: Callable[[int], None] | None = None,
) -> list[Prediction]:
    """Classify every row; one :class:`Prediction` per row, in order.

    Classifiers with a ``classify_batch(texts)`` method (the embedded one) are run in
    batches in a worker thread; others get one ``classify`` call per row, ``concurrency``
    at a time. A classifier that raises stops the run with :class:`EvaluationError`.
    A decision the Router would not dispatch (a route not in ``routes``, a confidence that is
    not a finite number in [0, 1]) is a rejection. Arguments are checked as :func:`evaluate`'s.
    """
    routes = _checked(classifier, routes, rows, concurrency)
    results: list[ClassifyResult | None] = [None] * len(rows)
    batch_fn = getattr(classifier, "classify_batch", None)
    if callable(batch_fn):
        names = [r.name for r in routes]
        for start in range(0, len(rows), 64):
            chunk = [r.text for r in rows[start : start + 64]]
            out = list(await anyio.to_thread.run_sync(batch_fn, chunk, names))
            if len(out) != len(chunk):
                raise EvaluationError(f"classify_batch returned {len(out)} results for {len(chunk)} texts")
            results[start : start + len(chunk)] = out
            if on_progress:
                on_progress(len(chunk))
    else:
        limiter = anyio.CapacityLimiter(max(1, concurrency))
        spec = tuple(routes)
        failed: list[tuple[int, Exception]] = []

        async def one(i: int, scope: anyio.CancelScope) -> None:
            async with limiter:
                try:
                    results[i] = classify_result(
                        await classifier.classify(ClassifyRequest(rows[i].text, spec)), classifier
                    )
                except Exception as exc:  # reported once, below, instead of as an exception group
                    failed.append((i, exc))
                    scope.cancel()
                    return
            if on_progress:
                on_progress(1)

        async with anyio.create_task_group() as tg:
            for i in range(len(rows)):
                tg.start_soon(one, i, tg.cancel_scope)
        if failed:
            i, exc = failed[0]
            raise EvaluationError(
                f"the classifier failed on line {rows[i].line} ({rows[i].text[:60]!r}): {type(exc).__name__}: {exc}"
            ) from exc
    declared = frozenset(r.name for r in routes)
    return [_prediction(r, declared) for r in results if r is not None]


def write_misrouted(report: EvalReport, path: str | Path) -> Path:
    """Write the misrouted rows as ``.csv`` or ``.json`` (by the file's suffix)."""
    p = Path(path)
    items = [asdict(m) for m in report.misrouted]
    if p.suffix.lower() == ".json":
        p.write_text(json.dumps(items, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    elif p.suffix.lower() == ".csv":
        with p.open("w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=["line", "text", "expected", "predicted", "confidence"])
            writer.writeheader()
            writer.writerows(items)
    else:
        raise UsageError(f"{p}: misrouted output must end in .csv or .json")
    return p
