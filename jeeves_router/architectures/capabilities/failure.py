"""The failure of a capability agent whose run ended without an answer.

A capability step that runs an agent raises this failure when the agent's run ends with a
status other than ``"ok"`` or ``"fallback"``; the step's recovery ladder then treats it as
any other failed step (CRITICAL: the Capabilities run stops with a report).
"""

from __future__ import annotations

from collections.abc import Mapping

from ...recovery.severity import ErrorSeverity, ExecutionError
from ...results import RunResult
from .capability import Capability

__all__ = ["ended"]


def ended(cap: Capability, res: RunResult) -> ExecutionError:
    """The failure of a capability agent whose run ended without an answer.

    A run its own recovery stopped (``"critical"``) carries the cause from its report into
    this failure (error type, the inner step, reason, severity, path), so the outer report
    says what went wrong inside, not only the status. The cause is the deepest failure's:
    its ``path`` is the path of the run whose recovery stopped (the report's own, which a
    Router or handoff chain passes on with its member's answer), and a report that itself
    carries a cause (a Capabilities run stopped for its own capability agent) passes that
    cause on whole, so a Capabilities inside a Capabilities names the agent that failed.

    Args:
        cap: The capability whose agent ran.
        res: The agent's result (its status is neither ``"ok"`` nor ``"fallback"``).

    Returns:
        A CRITICAL :class:`ExecutionError` naming the capability, with the inner cause when
        the run was stopped by its recovery.
    """
    message = f"capability {cap.name!r} ended with status {res.status!r}"
    report = res.report if res.status == "critical" else None
    cause: dict[str, object] | None = None
    if report:
        error = report.get("error") or {}
        deeper = error.get("cause")
        if isinstance(deeper, Mapping) and deeper:  # its message is the outer report's to add or not
            cause = {str(k): v for k, v in deeper.items() if k != "message"}
        else:
            cause = {
                "type": error.get("type"),
                "operation": report.get("operation"),
                "reason": report.get("reason"),
                "severity": report.get("severity"),
                "path": report.get("path") or "/".join(res.path),
            }
        what = cause.get("type") or "a limit"
        message += f": {what} at step {cause.get('operation')!r} ({cause.get('reason')})"
    return ExecutionError(
        ErrorSeverity.CRITICAL, message, capability_name=cap.name, metadata={"status": res.status}, cause=cause
    )
