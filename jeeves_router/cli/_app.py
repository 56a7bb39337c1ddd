"""The commands of ``jeeves-router`` (a typer app) and the console entry point :func:`main`."""

from __future__ import annotations

import logging
import sys
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import anyio
import typer
from rich.console import Console
from rich.table import Table

from .._files import check_output
from ..errors import UsageError
from . import _embed as emb
from . import _show as show
from ._embed import CalibrationName, EncoderName, ObjectiveName, ScorerName, data_file
from ._errors import VERBOSE, OneLineErrors, bad_input, flag
from ._observe import graph_command, trace_command
from ._replay import replay_command
from ._serve import mcp_command, serve_command

if TYPE_CHECKING:
    from ..classify.types import Classifier

__all__ = ["app", "main"]

app = typer.Typer(
    name="jeeves-router",
    help="Route requests offline with the embedded classifier, fit it, and measure any classifier.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=OneLineErrors,
)
out = Console()
err = Console(stderr=True)


@app.callback()
def _main(verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show debug logs.")] = False) -> None:
    """Route requests offline with the embedded classifier, fit it, and measure any classifier."""
    VERBOSE["on"] = verbose
    _configure_logging(verbose)


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is now (test runners swap it)."""

    jeeves_cli = True

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, value: Any) -> None:
        pass


def _configure_logging(verbose: bool) -> None:
    """Readable log lines of this library on stderr: warnings, or everything with ``-v``."""
    logger = logging.getLogger("jeeves_router")
    if not any(getattr(h, "jeeves_cli", False) for h in logger.handlers):
        handler = _StderrHandler()  # stderr: stdout is the command's output
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        logger.addHandler(handler)
    logger.setLevel(logging.DEBUG if verbose else logging.WARNING)


RoutesOpt = Annotated[
    Path | None,
    typer.Option(
        "--routes",
        "-r",
        help="Route file (JSON list of {name, description, examples}) or a classifier saved by `fit`. "
        "Default: the shipped support-desk classifier.",
    ),
]
ScorerOpt = Annotated[
    ScorerName | None,
    typer.Option("--scorer", "-s", help="Scorer when building from a route file (default late)."),
]
EncoderOpt = Annotated[
    EncoderName | None,
    typer.Option(
        "--encoder",
        "-e",
        help="Encoder when building from a route file: minilm (default), mpnet (the mpnet extra: more accurate, "
        "about 5x the CPU) or multilingual (the multilingual extra: 16 languages).",
    ),
]
ThresholdOpt = Annotated[float | None, typer.Option("--threshold", "-t", help="Override the acceptance threshold.")]
FitOnOpt = Annotated[
    Path | None, typer.Option("--fit-on", help="Fit calibration and threshold on this labelled JSONL.")
]
OosOpt = Annotated[str, typer.Option("--oos-label", help="Label of out-of-scope rows in the labelled data.")]


@app.command()
def route(
    ctx: typer.Context,
    text: Annotated[
        str | None, typer.Argument(help="The request to route; '-' reads one request per line from stdin.")
    ] = None,
    routes: RoutesOpt = None,
    scorer: ScorerOpt = None,
    encoder: EncoderOpt = None,
    threshold: ThresholdOpt = None,
    fit_on: FitOnOpt = None,
    oos_label: OosOpt = "oos",
    data: Annotated[
        Path | None,
        typer.Option("--data", "-d", help="Route every {\"text\": ...} row of this JSONL file ('-': stdin)."),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print decisions as JSON (one line each in batch mode).")
    ] = False,
) -> None:
    """Route requests and print the decisions (offline, no API key).

    One request as an argument; many with `-` (stdin, one per line) or --data FILE (JSONL).
    """
    with bad_input(ctx):
        if (text is None) == (data is None):
            raise UsageError(
                f"give one request as an argument, '-' to read requests from stdin, or {flag(ctx, 'data')} FILE.jsonl"
            )
        requests = emb.read_requests(data) if data is not None or text == "-" else None
        clf = emb.load_embedding(routes, scorer, threshold, fit_on, oos_label=oos_label, one_request=requests is None,
                                 encoder=encoder, typed=partial(flag, ctx))  # fmt: skip
        warning = emb.calibration_warning(clf, str(routes or "the classifier"))
        if warning:
            err.print(warning, highlight=False, soft_wrap=True, markup=False)
        if requests is None:
            show.decision(out, clf, text or "", as_json)
        else:
            show.decisions(err, clf, requests, as_json)


@app.command()
def fit(
    ctx: typer.Context,
    data: Annotated[Path, typer.Option("--data", "-d", help="Labelled validation JSONL {text, route} ('-': stdin).")],
    save_to: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="Where to write the fitted classifier (JSON); required, except with --classifier, "
            "where it is optional and receives the certified threshold (JSON).",
        ),
    ] = None,
    routes: RoutesOpt = None,
    scorer: ScorerOpt = None,
    encoder: EncoderOpt = None,
    classifier: Annotated[
        str | None,
        typer.Option(
            "--classifier",
            "-c",
            help="module:attr of any Classifier: certify a threshold for it "
            "(with --max-misroute) instead of fitting the embedded one.",
        ),
    ] = None,
    calibration: Annotated[CalibrationName, typer.Option(help="Calibration method.")] = CalibrationName.platt,
    objective: Annotated[ObjectiveName, typer.Option(help="How to choose the threshold.")] = ObjectiveName.balanced,
    target_precision: Annotated[float, typer.Option(help="For --objective precision, within (0, 1].")] = 0.9,
    max_misroute: Annotated[
        float | None,
        typer.Option(
            help="Instead of --objective: certify at most this share of wrong routes among accepted requests."
        ),
    ] = None,
    risk_confidence: Annotated[float, typer.Option(help="Confidence of the --max-misroute guarantee.")] = 0.95,
    oos_share: Annotated[
        float | None,
        typer.Option(
            help="With --max-misroute: certify for traffic with up to this share of out-of-scope requests, "
            "whatever the share in --data (in-scope and out-of-scope rows are bounded separately)."
        ),
    ] = None,
    oos_label: OosOpt = "oos",
) -> None:
    """Calibrate an embedded classifier and choose its threshold on labelled data; save it.

    With --classifier module:attr and --max-misroute, certify the confidence threshold of any
    classifier (LLM, cascade, custom) instead: use it as Router(require_confidence_above=...).
    """
    from ..eval import check_labels, load_labelled

    with bad_input(ctx):
        if save_to is not None:
            check_output(save_to, flag(ctx, "save_to"))
        emb.check_unit("target_precision", target_precision, low_open=True)
        emb.check_unit("max_misroute", max_misroute, low_open=True, high_open=True)
        emb.check_unit("risk_confidence", risk_confidence, low_open=True, high_open=True)
        emb.check_unit("oos_share", oos_share, high_open=True)
        if oos_share is not None and max_misroute is None:
            raise UsageError(f"{flag(ctx, 'oos_share')} applies to {flag(ctx, 'max_misroute')}; give both")
        if classifier is not None:
            if scorer is not None or encoder is not None or max_misroute is None:
                raise UsageError(
                    f"{flag(ctx, 'classifier')} needs {flag(ctx, 'max_misroute')} (and no {flag(ctx, 'scorer')} or "
                    f"{flag(ctx, 'encoder')}): fit certifies its threshold"
                )
            emb.certify_classifier(classifier, routes, data, save_to, oos_label=oos_label, max_misroute=max_misroute,
                                   risk_confidence=risk_confidence, oos_share=oos_share, out=out, err=err,
                                   typed=partial(flag, ctx))  # fmt: skip
            return
        if save_to is None:
            raise UsageError(f"fit needs {flag(ctx, 'save_to')} FILE.json: where to write the fitted classifier")
        clf = emb.load_embedding(routes or data_file(emb.DESK_ROUTES), scorer, None, None, encoder=encoder,
                                 typed=partial(flag, ctx))  # fmt: skip
        rows = load_labelled(data)
        check_labels(rows, clf.route_names, oos_label=oos_label, path=data)
        report = clf.fit(
            [r.text for r in rows],
            [r.label for r in rows],
            oos_label=oos_label,
            calibration=calibration.value,
            objective=objective.value,
            target_precision=target_precision,
            max_misroute=max_misroute,
            risk_confidence=risk_confidence,
            oos_share=oos_share,
        )
        clf.save(save_to)
    t = report.threshold
    recall = "-" if t.oos_recall is None else f"{t.oos_recall:.3f}"
    out.print(
        f"threshold {t.threshold:.3f} ({report.calibration}): in-scope accuracy {t.in_scope_accuracy:.3f}, "
        f"out-of-scope recall {recall} on {report.rows} rows -> {save_to}",
        highlight=False,
    )
    if report.risk is not None:
        r = report.risk
        out.print(
            f"misroute among accepted <= {r.max_misroute:g} with confidence {r.confidence:g}"
            f"{emb.share_note(r.oos_share)}: on the {r.testing_rows} testing rows coverage {r.coverage:.3f}, "
            f"misroute {r.misroute:.4f} "
            f"(upper bound {r.upper_bound:.4f})",
            highlight=False,
        )
    if not report.oos_tuned:
        err.print(
            f"warning: {data} has no out-of-scope rows (label {oos_label!r}), so the threshold was not tuned to "
            "reject out-of-scope requests; add some to the validation data",
            highlight=False, soft_wrap=True, markup=False,
        )  # fmt: skip


@app.command("eval")
def eval_(
    ctx: typer.Context,
    data: Annotated[
        Path,
        typer.Option("--data", "-d", help="Labelled JSONL {text, route}; route 'oos' = out of scope ('-': stdin)."),
    ],
    routes: RoutesOpt = None,
    scorer: ScorerOpt = None,
    encoder: EncoderOpt = None,
    classifier: Annotated[
        str | None,
        typer.Option("--classifier", "-c", help="centroid|nearest|logreg|late, or module:attr of any Classifier."),
    ] = None,
    fit_on: FitOnOpt = None,
    threshold: ThresholdOpt = None,
    misrouted: Annotated[Path | None, typer.Option("--out", "-o", help="Write misrouted rows (.csv or .json).")] = None,
    plots: Annotated[Path | None, typer.Option("--plots", help="Write PNG plots here (needs matplotlib).")] = None,
    oos_label: OosOpt = "oos",
) -> None:
    """Measure a classifier on labelled data: accuracy, coverage and misroutes, OOS recall, ECE, confusion."""
    from ..eval import check_labels, evaluate, load_labelled, load_routes, write_misrouted, write_plots

    with bad_input(ctx):
        if misrouted is not None:
            check_output(misrouted, flag(ctx, "misrouted"), suffixes=(".csv", ".json"))
        if plots is not None:
            check_output(plots, flag(ctx, "plots"), folder=True)
        rows = load_labelled(data)
        clf: Classifier
        if classifier is not None and ":" in classifier:
            if scorer is not None or encoder is not None or fit_on is not None or threshold is not None:
                embedded_only = ", ".join(flag(ctx, p) for p in ("scorer", "encoder", "fit_on"))
                raise UsageError(
                    f"{embedded_only} and {flag(ctx, 'threshold')} apply to the embedded classifier, "
                    f"not to {flag(ctx, 'classifier')} module:attr"
                )
            route_specs = load_routes(routes or data_file(emb.DESK_ROUTES))
            clf = emb.import_classifier(classifier, route_specs, option=flag(ctx, "classifier"))
        else:
            if classifier is not None and classifier not in ScorerName.__members__:
                raise UsageError(
                    f"{flag(ctx, 'classifier')} {classifier!r}: use centroid, nearest, logreg, late or module:attr"
                )
            if classifier is not None and scorer is not None:
                raise UsageError(f"give the scorer once: {flag(ctx, 'classifier')} or {flag(ctx, 'scorer')}")
            chosen = ScorerName(classifier) if classifier is not None else scorer
            model = emb.load_embedding(routes, chosen, threshold, fit_on, oos_label=oos_label, encoder=encoder,
                                       scorer_param="classifier" if classifier is not None else "scorer",
                                       typed=partial(flag, ctx))  # fmt: skip
            route_specs, clf = model.routes, model
            warning = emb.calibration_warning(model, str(routes or "the classifier"))
            if warning:
                err.print(warning, highlight=False, soft_wrap=True, markup=False)
        check_labels(rows, [r.name for r in route_specs], oos_label=oos_label, path=data)
        with emb.progress(err, len(rows), "classifying") as bar:
            advance = lambda n: bar.advance(0, n)  # noqa: E731
            evaluating = lambda: evaluate(clf, route_specs, rows, oos_label=oos_label, on_progress=advance)  # noqa: E731
            report = anyio.run(emb.closing_models, clf, evaluating)  # closes what the classifier's model built
        show.eval_report(out, report)
        if misrouted is not None:
            out.print(f"misrouted rows -> {write_misrouted(report, misrouted)}")
        if plots is not None:
            written = write_plots(report, plots)
            out.print("plots -> " + ", ".join(map(str, written)) if written else "matplotlib not installed: no plots")


DEMO_REQUESTS = (
    "I was charged twice",
    "the API returns 500 since this morning",
    "how do I turn on two-factor authentication",
    "my parcel has not arrived",
    "the kettle arrived broken, can I send it back",
    "what's the weather in Lisbon",
)


@app.command()
def demo(ctx: typer.Context) -> None:
    """Route a few sample requests through the shipped support-desk classifier."""
    with bad_input(ctx):
        clf = emb.load_embedding(None, None, None, None, typed=partial(flag, ctx))
        results = clf.classify_batch(list(DEMO_REQUESTS))
    table = Table("request", "route", "confidence", "runner-up", title="support desk (offline, no API key)")
    for text, res in zip(DEMO_REQUESTS, results, strict=True):
        c = res.classification
        table.add_row(
            text,
            c.route or "[yellow]out of scope[/]",
            f"{c.confidence:.2f}" if c.ok else f"({res.scores[0][1]:.2f})",
            c.runner_up or "",
        )
    out.print(table)


app.command("replay")(replay_command)
app.command("graph")(graph_command)
app.command("trace")(trace_command)


app.command("serve")(serve_command)
app.command("mcp")(mcp_command)


def main() -> None:
    """The ``jeeves-router`` console command: runs :data:`app`, then ends the process at once.

    The exit skips the interpreter's teardown (about 45 ms of a ``route``; see :mod:`._exit`). Call
    :data:`app` instead to run the commands inside a process that goes on afterwards.
    """
    from ._exit import leave

    try:
        app()
    except SystemExit as exc:
        leave(exc.code)
    leave(0)
