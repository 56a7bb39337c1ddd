"""The ``jeeves-router`` command line: route a request, fit and evaluate classifiers, offline.

Heavy imports (numpy, onnxruntime) happen inside the commands, so ``--help`` stays fast and
works without the ``embed`` extra. Bad input exits with code 2 and a message naming the file
and line.
"""

from __future__ import annotations

import importlib
import json
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import anyio
import typer
from rich.console import Console
from rich.table import Table

from .classify.types import Classifier, RouteSpec
from .cli_observe import graph_command, trace_command
from .errors import UsageError
from .journal.cli_replay import replay_command

if TYPE_CHECKING:
    from .classify.embedding import EmbeddingClassifier
    from .eval import EvalReport

__all__ = ["app"]

app = typer.Typer(
    name="jeeves-router",
    help="Route requests offline with the embedded classifier, fit it, and measure any classifier.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out = Console()
err = Console(stderr=True)

DESK_ROUTES = "desk_routes.json"
DESK_CLASSIFIER = "desk_classifier.json"


class ScorerName(str, Enum):
    """The embedded scorers the CLI can build."""

    centroid = "centroid"
    nearest = "nearest"
    logreg = "logreg"
    late = "late"


@app.callback()
def _main(verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show debug logs.")] = False) -> None:
    """Route requests offline with the embedded classifier, fit it, and measure any classifier."""
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


@contextmanager
def _bad_input() -> Iterator[None]:
    """Turn misuse into a one-line message and exit code 2."""
    try:
        yield
    except UsageError as exc:
        err.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None


def _data_file(name: str) -> Path:
    return Path(str(resources.files("jeeves_router") / "data" / name))


def _is_saved_classifier(path: Path) -> bool:
    try:
        head = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(head, dict) and str(head.get("format", "")).startswith("jeeves-router/")


def _load_embedding(
    routes_path: Path | None, scorer: ScorerName, threshold: float | None, fit_on: Path | None
) -> EmbeddingClassifier:
    """A saved classifier, or one built from a route file (and fitted when ``fit_on`` is given)."""
    from .classify.embedding import EmbeddingClassifier
    from .eval import check_labels, load_labelled, load_negatives, load_routes

    if routes_path is None:
        clf = EmbeddingClassifier.load(_data_file(DESK_CLASSIFIER))
    elif _is_saved_classifier(routes_path):
        clf = EmbeddingClassifier.load(routes_path)
    else:
        negatives = load_negatives(routes_path) if scorer is ScorerName.late else ()
        clf = EmbeddingClassifier(load_routes(routes_path), scorer=scorer.value, negatives=negatives)
    if fit_on is not None:
        rows = load_labelled(fit_on)
        check_labels(rows, clf.route_names, oos_label="oos", path=fit_on)
        clf.fit([r.text for r in rows], [r.label for r in rows])
    if threshold is not None:
        if not 0.0 <= threshold <= 1.0:
            raise UsageError(f"--threshold must be within [0, 1], got {threshold}")
        clf.threshold = threshold
    return clf


def _import_classifier(spec: str, routes: tuple[RouteSpec, ...]) -> Classifier:
    """``module:attribute`` naming a Classifier, or a factory called with the routes."""
    module_name, _, attr = spec.partition(":")
    try:
        obj: Any = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise UsageError(f"--classifier {spec!r}: cannot import it ({exc})") from None
    if not isinstance(obj, Classifier) and callable(obj):
        obj = obj(list(routes))
    if not isinstance(obj, Classifier):
        raise UsageError(f"--classifier {spec!r} is not a classifier (needs `async classify(request)`)")
    return obj


RoutesOpt = Annotated[
    Path | None,
    typer.Option(
        "--routes",
        "-r",
        help="Route file (JSON list of {name, description, examples}) or a classifier saved by `fit`. "
        "Default: the shipped support-desk classifier.",
    ),
]
ScorerOpt = Annotated[ScorerName, typer.Option("--scorer", "-s", help="Scorer when building from a route file.")]
ThresholdOpt = Annotated[float | None, typer.Option("--threshold", "-t", help="Override the acceptance threshold.")]
FitOnOpt = Annotated[
    Path | None, typer.Option("--fit-on", help="Fit calibration and threshold on this labelled JSONL.")
]


@app.command()
def route(
    text: Annotated[str, typer.Argument(help="The request to route.")],
    routes: RoutesOpt = None,
    scorer: ScorerOpt = ScorerName.centroid,
    threshold: ThresholdOpt = None,
    fit_on: FitOnOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the decision as JSON.")] = False,
) -> None:
    """Route one request and print the decision (offline, no API key)."""
    with _bad_input():
        clf = _load_embedding(routes, scorer, threshold, fit_on)
        result = clf.classify_text(text)
    c = result.classification
    if as_json:
        payload = {
            "route": c.route,
            "confidence": c.confidence,
            "status": c.status,
            "runner_up": c.runner_up,
            "margin": c.margin,
            "threshold": clf.threshold,
            "scores": dict(result.scores),
            "reason": c.reason,
        }
        out.print_json(json.dumps(payload))
        return
    if c.ok:
        margin = f", margin {c.margin:.2f} over {c.runner_up}" if c.margin is not None else ""
        out.print(f"[bold green]{c.route}[/]  confidence {c.confidence:.2f}{margin}")
    else:
        out.print(f"[bold yellow]no route[/] (out of scope): {c.reason or c.status}")
    table = Table("route", "confidence", box=None, padding=(0, 2))
    for name, p in result.scores[:5]:
        table.add_row(name, f"{p:.3f}")
    out.print(table)


@app.command()
def fit(
    data: Annotated[Path, typer.Option("--data", "-d", help="Labelled validation JSONL {text, route}.")],
    save_to: Annotated[Path, typer.Option("--out", "-o", help="Where to write the fitted classifier (JSON).")],
    routes: RoutesOpt = None,
    scorer: ScorerOpt = ScorerName.centroid,
    calibration: Annotated[str, typer.Option(help="platt or isotonic.")] = "platt",
    objective: Annotated[str, typer.Option(help="balanced or precision.")] = "balanced",
    target_precision: Annotated[float, typer.Option(help="For --objective precision.")] = 0.9,
) -> None:
    """Calibrate an embedded classifier and choose its threshold on labelled data; save it."""
    from .eval import check_labels, load_labelled

    with _bad_input():
        clf = _load_embedding(routes or _data_file(DESK_ROUTES), scorer, None, None)
        rows = load_labelled(data)
        check_labels(rows, clf.route_names, oos_label="oos", path=data)
        report = clf.fit(
            [r.text for r in rows],
            [r.label for r in rows],
            calibration=calibration,  # type: ignore[arg-type]
            objective=objective,  # type: ignore[arg-type]
            target_precision=target_precision,
        )
        clf.save(save_to)
    t = report.threshold
    out.print(
        f"threshold {t.threshold:.3f} ({report.calibration}): in-scope accuracy {t.in_scope_accuracy:.3f}, "
        f"out-of-scope recall {t.oos_recall:.3f} on {report.rows} rows -> {save_to}"
    )


@app.command("eval")
def eval_(
    data: Annotated[
        Path, typer.Option("--data", "-d", help="Labelled JSONL {text, route}; route 'oos' = out of scope.")
    ],
    routes: RoutesOpt = None,
    scorer: ScorerOpt = ScorerName.centroid,
    classifier: Annotated[
        str | None,
        typer.Option("--classifier", "-c", help="centroid|nearest|logreg|late, or module:attr of any Classifier."),
    ] = None,
    fit_on: FitOnOpt = None,
    threshold: ThresholdOpt = None,
    misrouted: Annotated[Path | None, typer.Option("--out", "-o", help="Write misrouted rows (.csv or .json).")] = None,
    plots: Annotated[Path | None, typer.Option("--plots", help="Write PNG plots here (needs matplotlib).")] = None,
    oos_label: Annotated[str, typer.Option(help="Label of out-of-scope rows.")] = "oos",
) -> None:
    """Measure a classifier on labelled data: accuracy, macro-F1, OOS recall, ECE, confusion."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from .eval import check_labels, evaluate, load_labelled, load_routes, write_misrouted, write_plots

    with _bad_input():
        rows = load_labelled(data)
        clf: Classifier
        if classifier is not None and ":" in classifier:
            route_specs = load_routes(routes or _data_file(DESK_ROUTES))
            clf = _import_classifier(classifier, route_specs)
        else:
            chosen = ScorerName(classifier) if classifier in ScorerName.__members__ else scorer
            if classifier is not None and classifier not in ScorerName.__members__:
                raise UsageError(f"--classifier {classifier!r}: use centroid, nearest, logreg or module:attr")
            emb = _load_embedding(routes, chosen, threshold, fit_on)
            route_specs, clf = emb.routes, emb
            if emb.threshold is None:
                err.print("note: no threshold, so nothing is rejected as out of scope; pass --fit-on VAL.jsonl")
        check_labels(rows, [r.name for r in route_specs], oos_label=oos_label, path=data)
        with Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err,
        ) as progress:
            task = progress.add_task("classifying", total=len(rows))
            report = anyio.run(
                lambda: evaluate(
                    clf, route_specs, rows, oos_label=oos_label, on_progress=lambda n: progress.advance(task, n)
                )
            )
        _print_report(report)
        if misrouted is not None:
            out.print(f"misrouted rows -> {write_misrouted(report, misrouted)}")
        if plots is not None:
            written = write_plots(report, plots)
            out.print("plots -> " + ", ".join(map(str, written)) if written else "matplotlib not installed: no plots")


def _print_report(report: EvalReport) -> None:
    summary = Table("metric", "value", box=None, padding=(0, 2))
    summary.add_row("rows", str(report.rows))
    summary.add_row("accuracy", f"{report.accuracy:.3f}")
    summary.add_row("in-scope accuracy", f"{report.in_scope_accuracy:.3f}")
    summary.add_row("macro-F1", f"{report.macro_f1:.3f}")
    summary.add_row("out-of-scope recall", "-" if report.oos_recall is None else f"{report.oos_recall:.3f}")
    summary.add_row("ECE", f"{report.ece:.3f}")
    out.print(summary)
    if len(report.labels) <= 12:
        cm = Table("expected \\ predicted", *report.labels, title="confusion matrix")
        for label, row in zip(report.labels, report.confusion, strict=True):
            cm.add_row(label, *[str(v) if v else "." for v in row])
        out.print(cm)
    if report.misrouted:
        wrong = Table("line", "text", "expected", "predicted", "conf", title=f"misrouted ({len(report.misrouted)})")
        for m in report.misrouted[:15]:
            wrong.add_row(str(m.line), m.text, m.expected, m.predicted, f"{m.confidence:.2f}")
        out.print(wrong)


DEMO_REQUESTS = (
    "I was charged twice",
    "the API returns 500 since this morning",
    "how do I turn on two-factor authentication",
    "my parcel has not arrived",
    "the kettle arrived broken, can I send it back",
    "what's the weather in Lisbon",
)


@app.command()
def demo() -> None:
    """Route a few sample requests through the shipped support-desk classifier."""
    with _bad_input():
        clf = _load_embedding(None, ScorerName.centroid, None, None)
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


@app.command("serve")
def serve_command(
    target: Annotated[str, typer.Argument(help="module:attr of an Agent, a list or a mapping of agents.")],
    host: Annotated[str, typer.Option(help="Address to listen on (not loopback: needs a token).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
    journal: Annotated[str | None, typer.Option(help="Sessions journal: a SQLite file or a postgresql:// URL.")] = None,
    token_env: Annotated[str | None, typer.Option(help="Environment variable holding the bearer token.")] = None,
    max_concurrency: Annotated[int, typer.Option(help="Runs in flight at once; more get 429.")] = 64,
    grace: Annotated[int, typer.Option(help="Seconds runs may finish in after SIGTERM.")] = 30,
) -> None:
    """Serve agents over HTTP: OpenAI-compatible chat completions, run event streams, sessions."""
    import sys

    with _bad_input():
        from .serve import load_agents, serve, token_from_env

        sys.path.insert(0, str(Path.cwd()))
        token = token_from_env(token_env)
        options: dict[str, Any] = {"journal": journal, "max_concurrency": max_concurrency}
        serve(load_agents(target), host=host, port=port, token=token, grace_s=grace, **options)


@app.command("mcp")
def mcp_(
    target: Annotated[str, typer.Argument(help="The agent (router) to serve, as module:attribute.")],
    transport: Annotated[str, typer.Option("--transport", help="stdio or http (streamable HTTP).")] = "stdio",
    host: Annotated[str, typer.Option("--host", help="HTTP: interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="HTTP: port.")] = 8000,
) -> None:
    """Serve an agent or router as an MCP server with one tool, `ask` (needs the mcp extra)."""
    from .mcp.server import main

    with _bad_input():
        if transport not in ("stdio", "http"):
            raise UsageError(f"--transport must be stdio or http, got {transport!r}")
        main(target, transport="http" if transport == "http" else "stdio", host=host, port=port)


if __name__ == "__main__":
    app()
