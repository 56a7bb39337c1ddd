"""How a run that recovery stopped ends: its report, its ``critical`` result, its event.

:meth:`RecoveryRun.stopped <jeeves_router.recovery.run.RecoveryRun.stopped>` hands a
:class:`~.failure.RecoveryStop` here once the architecture has caught it at the top of its
``run``: the report is built from the run's step records and counters (explained by
``Recovery(explain_model=...)`` when given, a journaled model call that counts in the run's
usage), set on the run's :class:`~jeeves_router.results.RunResult` with status
``"critical"``, and returned as the ``recovery.report`` event.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from ..events import RecoveryReport
from ..results import RunResult
from ..usage import NO_USAGE
from .failure import RecoveryStop, _BudgetSpent
from .report import EXPLANATION_USAGE_KEY, build_report, explain_report_usage

if TYPE_CHECKING:
    from .run import RecoveryRun

__all__ = ["end_stopped"]


async def end_stopped(rec: RecoveryRun, stop: RecoveryStop, result: dict[str, Any]) -> RecoveryReport:
    """Write ``rec``'s report, set its run's ``critical`` result (with ``result``'s fields) and return the event.

    Raises:
        Exception: the original error instead, in development mode (``Recovery(reraise=True)``).
    """
    f = stop.failure
    if rec.config.reraise and not isinstance(f.error, _BudgetSpent):
        raise f.error
    rec.ctx.failure = None if isinstance(f.error, _BudgetSpent) else f.error  # an enclosing report's cause
    report = build_report(
        error=None if isinstance(f.error, _BudgetSpent) else f.error,
        classification=f.classification,
        reason=f.decision.reason,
        operation=f.operation,
        steps=rec.records,
        elapsed_s=rec.elapsed(),
        route=f.route,
        capability=f.capability,
        path=rec.ctx.path,
        counters={"steps": rec.steps, "reclassifications": rec.reclassifications, "replans": rec.replans},
        expose_details=rec.expose_details,
    )
    ctx, model = rec.ctx, rec.config.explain_model
    fields: dict[str, Any] = {"usage": rec.usage, **result}
    if model is not None:  # a model call of the run: journaled (a resume replays it) and counted
        explain = partial(explain_report_usage, report, model, timeout_s=rec.config.explain_timeout_s)
        explanation, used = await ctx.record("explain", {"reason": report["reason"]}, explain)
        report.update({"explanation": explanation} if explanation else {})
        if used != NO_USAGE:
            ctx.ledger.spent(ctx.path, used)
            fields["usage"] += used
            if "usage_by_route" in fields:
                fields["usage_by_route"] = {**fields["usage_by_route"], EXPLANATION_USAGE_KEY: used}
    ctx.result = RunResult(
        output=None, status="critical", session_id=ctx.session_id, path=ctx.path, report=report, **fields
    )
    return RecoveryReport(
        session_id=ctx.session_id,
        path=ctx.path,
        severity=report["severity"],
        user_message=report["user_message"],
        report=report,
    )
