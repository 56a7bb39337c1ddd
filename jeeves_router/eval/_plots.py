"""Plots of an :class:`~jeeves_router.eval.EvalReport`: confusion matrix, reliability, risk-coverage."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._report import EvalReport

__all__ = ["write_plots"]


def write_plots(report: EvalReport, directory: str | Path) -> list[Path]:
    """Write ``confusion_matrix.png``, ``reliability.png`` and ``risk_coverage.png``; [] without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    size = max(4.0, min(24.0, 0.35 * len(report.labels) + 2))
    fig: Any
    fig, ax = plt.subplots(figsize=(size, size))
    ax.imshow(report.confusion, cmap="Blues")
    ticks = range(len(report.labels))
    ax.set_xticks(ticks, report.labels, rotation=90, fontsize=7 if len(report.labels) > 20 else 9)
    ax.set_yticks(ticks, report.labels, fontsize=7 if len(report.labels) > 20 else 9)
    ax.set_xlabel("predicted")
    ax.set_ylabel("expected")
    if len(report.labels) <= 20:
        for i, row in enumerate(report.confusion):
            for j, v in enumerate(row):
                if v:
                    ax.text(j, i, str(v), ha="center", va="center", fontsize=8)
    ax.set_title(f"accuracy {report.accuracy:.3f}")
    fig.tight_layout()
    paths = [out / "confusion_matrix.png", out / "reliability.png", out / "risk_coverage.png"]
    fig.savefig(paths[0], dpi=120)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(5, 5))
    ax.plot([0, 1], [0, 1], linestyle="--", color="grey", label="perfect")
    used = [(c, a) for c, a, k in report.reliability if k]
    ax.plot([c for c, _ in used], [a for _, a in used], marker="o", label="classifier")
    ax.set_xlabel("confidence of the top route")
    ax.set_ylabel("accuracy of the top route")
    ax.set_title(f"reliability (ECE {report.ece:.3f})")
    ax.legend()
    fig.tight_layout()
    fig.savefig(paths[1], dpi=120)
    plt.close(fig)
    fig, ax = plt.subplots(figsize=(5, 4))
    ax.plot([c for c, _ in report.risk_coverage], [r for _, r in report.risk_coverage], label="most confident first")
    if report.misroute is not None:
        ax.scatter([report.coverage], [report.misroute], color="red", zorder=3, label="at the threshold")
    ax.set_xlabel("coverage (share auto-routed)")
    ax.set_ylabel("misroute rate among auto-routed")
    ax.set_xlim(0, 1)
    ax.set_ylim(bottom=0)
    ax.set_title("risk-coverage")
    ax.legend()
    fig.tight_layout()
    fig.savefig(paths[2], dpi=120)
    plt.close(fig)
    return paths
