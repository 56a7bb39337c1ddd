"""Helpers of the embedded-router commands of ``jeeves-router`` (route, fit, eval).

Kept apart from the commands (``_app``) so that module stays a list of commands.
Nothing here imports numpy or onnxruntime at module level: ``--help`` stays fast.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Awaitable, Callable
from enum import Enum
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from .._files import write_whole
from ..errors import UsageError, argument_named

if TYPE_CHECKING:
    from rich.console import Console

    from ..classify.embedding import EmbeddingClassifier, Encoder
    from ..classify.types import Classifier, ClassifyResult, RouteSpec

__all__ = [
    "ScorerName",
    "EncoderName",
    "make_encoder",
    "CalibrationName",
    "ObjectiveName",
    "data_file",
    "load_embedding",
    "closing_models",
    "import_classifier",
    "calibration_warning",
    "check_unit",
    "read_requests",
    "decision_payload",
    "certify_classifier",
    "DESK_ROUTES",
    "DESK_CLASSIFIER",
]

T = TypeVar("T")

DESK_ROUTES = "desk_routes.json"
DESK_CLASSIFIER = "desk_classifier.json"


class ScorerName(str, Enum):
    """The embedded scorers the CLI can build."""

    centroid = "centroid"
    nearest = "nearest"
    logreg = "logreg"
    late = "late"


class EncoderName(str, Enum):
    """The sentence encoders the CLI can build a classifier on."""

    minilm = "minilm"
    mpnet = "mpnet"
    multilingual = "multilingual"


def make_encoder(name: EncoderName) -> Encoder:
    """The encoder called ``name`` (its extra must be installed)."""
    from ..classify.embedding import MiniLMEncoder, MPNetEncoder, MultilingualUSEEncoder

    if name is EncoderName.mpnet:
        return MPNetEncoder()
    if name is EncoderName.multilingual:
        return MultilingualUSEEncoder()
    return MiniLMEncoder()


class CalibrationName(str, Enum):
    """Calibration methods of ``fit``."""

    platt = "platt"
    isotonic = "isotonic"


class ObjectiveName(str, Enum):
    """Threshold objectives of ``fit``."""

    balanced = "balanced"
    precision = "precision"


def data_file(name: str) -> Path:
    """A file shipped in ``jeeves_router/data``."""
    return Path(str(resources.files("jeeves_router") / "data" / name))


def _saved(path: Path) -> dict[str, Any] | None:
    """The contents of ``path`` when it is a saved classifier (``None``: a route file, or not JSON)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    fmt = data.get("format") if isinstance(data, dict) else None
    return data if isinstance(fmt, str) and fmt.startswith("jeeves-router/") else None


def check_unit(name: str, value: float | None, *, low_open: bool = False, high_open: bool = False) -> None:
    """Raise UsageError unless ``value`` is None or within [0, 1] (open ends as asked).

    ``name`` is the command's parameter (``max_misroute``): ``bad_input(ctx)`` reports the
    error with the option the user typed for it (``--max-misroute``).
    """
    if value is None:
        return
    lo_ok = value > 0.0 if low_open else value >= 0.0
    hi_ok = value < 1.0 if high_open else value <= 1.0
    if not (lo_ok and hi_ok):
        interval = f"{'(' if low_open else '['}0, 1{')' if high_open else ']'}"
        raise UsageError(f"{name} must be within {interval}, got {value}", argument=argument_named(name))


def _scorer_options(scorer: ScorerName, encoder: EncoderName | None) -> dict[str, Any]:
    """The scorer's options for ``encoder``: MPNet's ``late`` weights were chosen on its own (README)."""
    if scorer is ScorerName.late and encoder is EncoderName.mpnet:
        from ..classify.embedding.mpnet import LATE_OPTIONS

        return dict(LATE_OPTIONS)
    return {}


def load_embedding(
    routes_path: Path | None,
    scorer: ScorerName | None,
    threshold: float | None,
    fit_on: Path | None,
    *,
    typed: Callable[[str], str],
    oos_label: str = "oos",
    scorer_param: str = "scorer",
    one_request: bool = False,
    encoder: EncoderName | None = None,
) -> EmbeddingClassifier:
    """A saved classifier, or one built from a route file (and fitted when ``fit_on`` is given).

    ``scorer`` and ``encoder`` (``None``: not given) only apply to a route file; giving one
    with a saved classifier (including the shipped desk, the default) is an error rather than
    ignored (a saved classifier keeps the encoder it was fitted with). ``typed`` gives the
    option the user types for a command parameter (``cli._errors.flag``), for the messages;
    ``scorer_param`` is the parameter that gave ``scorer``. With ``one_request`` numpy's BLAS
    is kept to one thread (unless the user set it).
    """
    if one_request and "numpy" not in sys.modules:
        # One short request gains nothing from BLAS threads, and OpenBLAS sets up its
        # per-thread buffers when numpy is imported (about 90 ms of a ~0.6 s command here).
        # A value the user set is kept.
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from ..classify.embedding import EmbeddingClassifier

    check_unit("threshold", threshold)
    source = routes_path if routes_path is not None else data_file(DESK_CLASSIFIER)
    saved = _saved(source) if source.is_file() else None
    if saved is not None and scorer is not None:
        what = "the shipped support-desk classifier" if routes_path is None else f"{source}, a saved classifier"
        raise UsageError(
            f"{typed(scorer_param)} {scorer.value} applies to a route file, but the routes come from {what}; "
            f"pass {typed('routes')} ROUTES.json to build a new one"
        )
    if saved is not None and encoder is not None:
        what = "the shipped support-desk classifier" if routes_path is None else f"{source}, a saved classifier"
        kept = saved.get("encoder")
        raise UsageError(
            f"{typed('encoder')} {encoder.value} applies to a route file, but the routes come from {what}, which "
            f"keeps the encoder it was fitted with ({kept.get('name') if isinstance(kept, dict) else 'unknown'}); "
            f"pass {typed('routes')} ROUTES.json to build a new one"
        )
    if saved is not None:  # the encoder the file was saved with (one text runs on one thread)
        clf = EmbeddingClassifier.from_dict(saved, source=str(source))
    else:
        from ..classify.embedding.classifier import DEFAULT_SCORER
        from ..eval import load_negatives, load_routes  # route files only: a saved classifier needs neither

        kind = scorer if scorer is not None else ScorerName(DEFAULT_SCORER)
        negatives = load_negatives(source) if kind is ScorerName.late else ()
        chosen = make_encoder(encoder) if encoder is not None else None
        options = _scorer_options(kind, encoder)
        clf = EmbeddingClassifier(load_routes(source), encoder=chosen, scorer=kind.value, scorer_options=options,
                                  negatives=negatives)  # fmt: skip
    if fit_on is not None:
        from ..eval import check_labels, load_labelled

        rows = load_labelled(fit_on)
        check_labels(rows, clf.route_names, oos_label=oos_label, path=fit_on)
        clf.fit([r.text for r in rows], [r.label for r in rows], oos_label=oos_label)
    if threshold is not None:
        clf.threshold = threshold
    return clf


async def closing_models(clf: Classifier, work: Callable[[], Awaitable[T]]) -> T:
    """Await ``work()``, then close the HTTP clients ``clf``'s model built on this command's event loop."""
    from .._models_held import aclose_models

    try:
        return await work()
    finally:
        await aclose_models(classifiers=[clf])


def import_classifier(spec: str, routes: tuple[RouteSpec, ...], *, option: str) -> Classifier:
    """``module:attribute`` naming a Classifier, or a factory called with the routes; ``option`` gave it."""
    from .._targets import import_object
    from ..classify.types import Classifier

    obj: Any = import_object(spec, option=option, example="my_classifiers:llm")
    if isinstance(obj, type) or (not isinstance(obj, Classifier) and callable(obj)):
        try:
            obj = obj(list(routes))
        except Exception as exc:  # any failure of user code becomes one line
            raise UsageError(
                f"{option} {spec!r}: calling it with the route list failed ({type(exc).__name__}: {exc}); "
                "name a Classifier instance or a factory `def make(routes) -> Classifier`"
            ) from None
    if not isinstance(obj, Classifier):
        raise UsageError(f"{option} {spec!r} is not a classifier (needs `async classify(request)`)")
    return obj


def calibration_warning(clf: EmbeddingClassifier, source: str) -> str | None:
    """A warning when ``clf`` would accept requests it was never calibrated to judge."""
    fix = "fit it with `jeeves-router fit --data VAL.jsonl`, or pass --fit-on VAL.jsonl"
    if clf.threshold is None:
        return (
            f"warning: {source} is not calibrated: it has no threshold, so every request gets its best route, "
            f"even out-of-scope ones; {fix}"
        )
    if clf.calibrator is None:
        return f"warning: {source} is not calibrated: its confidences are raw similarity scores; {fix}"
    return None


def read_requests(path: Path | None) -> list[tuple[int, str]]:
    """(line, text) pairs from a JSONL file of ``{"text": ...}`` objects, or stdin lines when ``path`` is None.

    The texts are valid Unicode (see :func:`~jeeves_router.eval._data.stdin_text` and ``decode_json``).
    """
    from ..eval import DataFileError
    from ..eval._data import jsonl_values, stdin_text

    if path is None:
        lines = [(n, line.strip()) for n, line in enumerate(stdin_text().splitlines(), 1) if line.strip()]
        if not lines:
            raise UsageError("route -: no requests on stdin (one per line)")
        return lines
    found: list[tuple[int, str]] = []
    for n, obj in jsonl_values(path):
        text = obj.get("text") if isinstance(obj, dict) else obj
        if not isinstance(text, str):
            raise DataFileError(path, 'expected {"text": "..."} (or a JSON string) per line', line=n)
        found.append((n, text))
    if not found:
        raise DataFileError(path, 'no requests: give one {"text": "..."} per line')
    return found


def decision_payload(clf: EmbeddingClassifier, result: ClassifyResult) -> dict[str, Any]:
    """The JSON form of one decision, as ``route --json`` prints it."""
    c = result.classification
    return {
        "route": c.route,
        "confidence": c.confidence,
        "status": c.status,
        "runner_up": c.runner_up,
        "margin": None if c.margin is None else round(c.margin, 6),
        "threshold": clf.threshold,
        "calibrated": clf.calibrator is not None and clf.threshold is not None,
        "scores": dict(result.scores),
        "reason": c.reason,
    }


def progress(console: Console, total: int, label: str) -> Any:
    """A rich progress bar on ``console`` (the caller enters it and advances task 0)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    bar = Progress(
        "[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=console, transient=False,
    )  # fmt: skip
    bar.add_task(label, total=total)
    return bar


def share_note(oos_share: float | None) -> str:
    """`` for up to 20% out-of-scope traffic`` (empty without a stated share)."""
    return "" if oos_share is None else f" for up to {oos_share:.0%} out-of-scope traffic"


def certify_classifier(
    spec: str,
    routes: Path | None,
    data: Path,
    save_to: Path | None,
    *,
    oos_label: str,
    max_misroute: float,
    risk_confidence: float,
    oos_share: float | None = None,
    out: Console,
    err: Console,
    typed: Callable[[str], str],
) -> None:
    """``fit --classifier module:attr --max-misroute X``: certify any classifier's threshold.

    ``typed`` gives the option the user types for a command parameter (``cli._errors.flag``).
    """
    import anyio

    from ..classify.risk import choose_risk_threshold
    from ..eval import check_labels, load_labelled, load_routes, predict

    specs = load_routes(routes or data_file(DESK_ROUTES))
    clf = import_classifier(spec, specs, option=typed("classifier"))
    rows = load_labelled(data)
    check_labels(rows, [r.name for r in specs], oos_label=oos_label, path=data)
    with progress(err, len(rows), "classifying") as bar:
        advance = lambda n: bar.advance(0, n)  # noqa: E731
        preds = anyio.run(closing_models, clf, lambda: predict(clf, specs, rows, on_progress=advance))
    correct = [p.top_route == r.label and r.label != oos_label for p, r in zip(preds, rows, strict=True)]
    risk = choose_risk_threshold(
        [p.top_confidence for p in preds], correct, max_misroute=max_misroute, confidence=risk_confidence,
        in_scope=[r.label != oos_label for r in rows], oos_share=oos_share,
    )  # fmt: skip
    if not risk.certified:
        unrouted = sum(p.top_route is None for p in preds)
        why = (
            f" ({unrouted} of them got no declared route with a confidence in [0, 1] from the classifier)"
            if unrouted else ""
        )  # fmt: skip
        raise UsageError(
            f"no threshold keeps misroutes at or below {max_misroute:g} with confidence {risk_confidence:g} on these "
            f"{len(rows)} rows{why}; allow more misroutes or add labelled rows"
        )
    out.print(
        f"require_confidence_above={risk.cut:.6g}: misroute among accepted <= {max_misroute:g} with confidence "
        f"{risk_confidence:g}{share_note(oos_share)}; "
        f"on the {risk.testing_rows} testing rows coverage {risk.coverage:.3f}, misroute "
        f"{risk.misroute:.4f} (upper bound {risk.upper_bound:.4f})",
        highlight=False,
    )
    if save_to is not None:
        payload = {"format": "jeeves-router/risk-threshold", "classifier": spec, "threshold": risk.cut,
                   "risk": {k: getattr(risk, k) for k in risk.__slots__}}  # fmt: skip
        text = (json.dumps(payload, indent=1) + "\n").encode("utf-8")
        write_whole(save_to, lambda f: f.write(text))
