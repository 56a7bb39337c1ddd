"""How the command line prints routing decisions and evaluation reports (rich tables, JSON lines)."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from . import _embed as emb

if TYPE_CHECKING:
    from ..classify.embedding import EmbeddingClassifier
    from ..eval import EvalReport

__all__ = ["decision", "decisions", "eval_report"]


def decision(out: Console, clf: EmbeddingClassifier, text: str, as_json: bool) -> None:
    """One request's decision: the route, its margin and the top five scores, or the JSON payload."""
    result = clf.classify_text(text)
    c = result.classification
    if as_json:
        out.print_json(json.dumps(emb.decision_payload(clf, result)))
        return
    if c.ok:
        margin = f", margin {c.margin:.2f} over {c.runner_up}" if c.margin is not None else ""
        out.print(f"[bold green]{c.route}[/]  confidence {c.confidence:.2f}{margin}")
    else:
        out.print(f"[bold yellow]no route[/] (out of scope): {c.reason or c.status}")
    if not result.scores:  # nothing was scored (an empty request): no table to show
        return
    table = Table("route", "confidence", box=None, padding=(0, 2))
    for name, p in result.scores[:5]:
        table.add_row(name, f"{p:.3f}")
    out.print(table)


def decisions(err: Console, clf: EmbeddingClassifier, requests: list[tuple[int, str]], as_json: bool) -> None:
    """Route in batches of 64 with a progress bar on stderr; one output line per request."""
    with emb.progress(err, len(requests), "routing") as bar:
        for start in range(0, len(requests), 64):
            chunk = requests[start : start + 64]
            for (line, text), res in zip(chunk, clf.classify_batch([t for _, t in chunk]), strict=True):
                c = res.classification
                if as_json:
                    row = {"line": line, "text": text, **emb.decision_payload(clf, res)}
                    sys.stdout.write(json.dumps(row, ensure_ascii=False) + "\n")
                else:
                    sys.stdout.write(f"{c.route or '-'}\t{c.confidence:.3f}\t{text}\n")
            bar.advance(0, len(chunk))


def eval_report(out: Console, report: EvalReport) -> None:
    """The summary, the risk-coverage marks, the confusion matrix (up to 12 labels) and the first misroutes."""
    summary = Table("metric", "value", box=None, padding=(0, 2))
    summary.add_row("rows", str(report.rows))
    summary.add_row("accuracy", f"{report.accuracy:.3f}")
    summary.add_row("in-scope accuracy", f"{report.in_scope_accuracy:.3f}")
    summary.add_row("macro-F1", f"{report.macro_f1:.3f}")
    summary.add_row("out-of-scope recall", "-" if report.oos_recall is None else f"{report.oos_recall:.3f}")
    summary.add_row("ECE", f"{report.ece:.3f}")
    summary.add_row("coverage (auto-routed)", f"{report.coverage:.3f}")
    summary.add_row("misroute among auto-routed", "-" if report.misroute is None else f"{report.misroute:.4f}")
    out.print(summary)
    if report.risk_coverage:
        # the points nearest 50 % ... 100 %, each once (after a tie one point can be nearest to several)
        curve = report.risk_coverage
        marks = dict.fromkeys(min(curve, key=lambda pt: abs(pt[0] - p / 100)) for p in (50, 70, 80, 90, 100))
        out.print("risk-coverage (misroute at coverage): " + ", ".join(f"{c:.0%} {r:.4f}" for c, r in marks))
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
