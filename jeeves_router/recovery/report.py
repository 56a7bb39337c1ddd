"""The error report written when recovery stops a run. Building it never raises.

The report is a JSON-ready mapping for developers (on ``RunResult.report`` and in the
``recovery.report`` event). Its ``user_message`` is the only part meant for end users: it
is the hook's ``user_message`` when one was given, else a generic sentence that names no
exception, route, model or stack detail. Error messages appear under ``error`` only when
``expose_details`` is set (they may quote provider or tool output): the rule every other
place an exception's text could leave a run follows too (:mod:`jeeves_router._shown`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio

from .._log import get_logger
from .._shown import shown_message
from ..errors import StreamInterrupted
from ..messages import user
from ..models.base import Model, ModelRequest
from ..usage import NO_USAGE, Usage, cut_requests, spent_usage, spent_when_cut
from .severity import ErrorClassification, ErrorSeverity, ExecutionError

__all__ = [
    "EXPLANATION_USAGE_KEY",
    "GENERIC_USER_MESSAGE",
    "StepRecord",
    "build_report",
    "explain_report",
    "explain_report_usage",
    "user_message_for",
]

#: ``RunResult.usage_by_route`` key of the call that explains a report (``Recovery(explain_model=...)``).
EXPLANATION_USAGE_KEY = "<explanation>"

log = get_logger(__name__)

GENERIC_USER_MESSAGE = "Sorry, I could not complete your request. Please try again later."
_USER_MESSAGES = {
    "retries_exhausted": "A service I depend on is not responding right now. Please try again in a few minutes.",
    "time_limit": "Your request took too long to complete. Please try again, perhaps with a narrower request.",
    "max_steps": "Your request needed more steps than allowed. Please try a narrower request.",
    "reclassifications_exhausted": "I could not find a way to handle this request. Please rephrase it.",
    "replans_exhausted": "I could not find a plan that completes this request. Please rephrase it.",
}
_SUGGESTIONS = {
    "retries_exhausted": "The step kept failing with a transient error: check the service or network, or raise "
    "the step's RetryPolicy.max_attempts.",
    "adapter_retries_exhausted": "The model call kept failing with a transient error and its adapter gave up: "
    "check the service or network, or give the model more attempts (e.g. OpenAIModel(..., "
    "retry=RetryPolicy(max_attempts=...))); the step's RetryPolicy does not retry it again.",
    "stream_interrupted": "The model's stream broke after text reached the consumer (StreamInterrupted); it is "
    "not retried, by the adapter or the ladder, even if a classify_error hook answers RETRIABLE (a retry "
    "would repeat that text): accept the partial answer, or check the service or network.",
    "output_started": "The failure came after text reached the consumer, so it was not retried (a retry would "
    "repeat text); make the step fail before streaming, or accept the partial answer.",
    "effects_done": "The step failed after tool calls completed in it, so it was not replanned (a new plan "
    "could run that call again); make the step fail before its side effects, mark the tools that only read "
    "@tool(repeatable=True), or return RETRIABLE (a retry answers completed calls from the run's ledger).",
    "time_limit": "The run hit Recovery(time_limit_s=...): raise it or make the slow step faster.",
    "max_steps": "The run hit Recovery(max_steps=...): raise it or look for a retry or planning loop.",
    "reclassifications_exhausted": "No other route or capability could take the request: add a fallback route, "
    "improve descriptions, or raise Recovery(max_reclassifications=...).",
    "replans_exhausted": "The orchestrator could not make a working plan: check capability descriptions and "
    "requires/provides, or raise Recovery(max_replans=...).",
    "reclassify_unavailable": "RECLASSIFICATION was raised where nothing can classify again: run this agent "
    "behind a Router or a Capabilities architecture, or use another severity.",
    "replan_unavailable": "REPLANNING was raised where there is no plan: use it inside a Capabilities "
    "architecture, or use another severity.",
    "critical": "Inspect the error type below; if the failure is transient, return RETRIABLE from a "
    "classify_error hook.",
}


def _adapter_gave_up(error: BaseException | None) -> bool:
    """Whether ``error`` is a model call its adapter's retrier retried and gave up on (``retries_exhausted``)."""
    return bool(getattr(error, "retries_exhausted", False))


def _suggestion(error: BaseException | None, reason: str) -> str:
    """The first suggestion: by ``reason``, unless the failure itself makes that advice useless."""
    if reason == "retries_exhausted" and _adapter_gave_up(error):
        reason = "adapter_retries_exhausted"  # the step's RetryPolicy has no say over it
    elif reason == "critical" and isinstance(error, StreamInterrupted):
        reason = "stream_interrupted"  # a RETRIABLE hook answer would not be followed
    return _SUGGESTIONS.get(reason, _SUGGESTIONS["critical"])


def _not_retried(error: BaseException | None, severity: ErrorSeverity, reason: str) -> str | None:
    """Why a failure judged RETRIABLE was not retried by the ladder (the report's ``not_retried``), or ``None``.

    ``None`` too when it was retried up to its policy or a budget stopped it (``reason`` says so).
    """
    if severity is not ErrorSeverity.RETRIABLE:
        return None
    if reason == "output_started":
        return (
            "judged RETRIABLE, not retried: text of the failed attempt had already reached the consumer, and a "
            "retry would send it again (no retry once text reached the consumer, whatever a classify_error hook "
            "answers)"
        )
    if reason == "retries_exhausted" and _adapter_gave_up(error):
        attempts = getattr(error, "attempt", None)
        made = f" after {attempts} attempts" if isinstance(attempts, int) else ""
        return (
            f"judged RETRIABLE, not retried: the model adapter had already retried this call with its own retry "
            f"policy and gave up{made}; a model call has one retry layer, the adapter's, so the ladder adds none "
            "(whatever a classify_error hook answers)"
        )
    return None


@dataclass(frozen=True, slots=True)
class StepRecord:
    """One step of the run as the report shows it.

    Attributes:
        operation: The step, e.g. ``"classify"`` or ``"capability:sql"``.
        ok: Whether it finally succeeded.
        attempts: Attempts made.
        duration_s: Time spent over all attempts.
        error_type: The class name of the last failure, if any.
        severity: The severity of the last failure, if any.
    """

    operation: str
    ok: bool
    attempts: int = 1
    duration_s: float = 0.0
    error_type: str | None = None
    severity: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "operation": self.operation,
            "ok": self.ok,
            "attempts": self.attempts,
            "duration_s": round(self.duration_s, 6),
            "error_type": self.error_type,
            "severity": self.severity,
        }


def user_message_for(classification: ErrorClassification | None, reason: str) -> str:
    """The end-user message: the hook's ``user_message``, else a generic one for ``reason``."""
    if classification is not None and classification.user_message:
        return classification.user_message
    return _USER_MESSAGES.get(reason, GENERIC_USER_MESSAGE)


def _safe_str(value: object, limit: int = 500) -> str:
    try:
        text = str(value)
    except Exception:
        text = f"<unprintable {type(value).__name__}>"
    return text if len(text) <= limit else text[:limit] + "..."


def _root_cause(error: BaseException) -> BaseException | None:
    """The exception ``error.cause`` describes: down the chain while it passes on an inner cause.

    An inner Capabilities run that stopped for a capability agent's failure passes that
    failure's cause on (the deepest one); its exception is found the same way down.
    """
    inner = error.__cause__
    while isinstance(inner, ExecutionError) and inner.cause:
        inner = inner.__cause__
    return inner


def build_report(
    *,
    error: BaseException | None,
    classification: ErrorClassification | None,
    reason: str,
    operation: str,
    steps: Sequence[StepRecord] = (),
    elapsed_s: float = 0.0,
    route: str | None = None,
    capability: str | None = None,
    path: Sequence[str] = (),
    counters: Mapping[str, int] | None = None,
    expose_details: bool = False,
) -> dict[str, Any]:
    """The structured report of a stopped run. Never raises (falls back to a minimal one).

    A failure judged RETRIABLE that the ladder did not retry (``reason`` ``output_started``, or
    ``retries_exhausted`` for a model call its adapter gave up on) has ``not_retried``: why.

    ``path`` is the route path of the run whose recovery stopped it (``"/"``-joined in the
    report): a Router or handoff chain that passes a member's critical answer on passes its
    report, which so still names the member that failed.
    """
    try:
        severity = classification.severity if classification is not None else ErrorSeverity.CRITICAL
        attempts: dict[str, int] = {}
        for s in steps:
            attempts[s.operation] = attempts.get(s.operation, 0) + s.attempts
        suggestions = [_suggestion(error, reason)]
        hook_error = classification.hook_error if classification is not None else None
        if hook_error is not None:
            suggestions.append("A classify_error hook raised while classifying the failure: fix the hook.")
        err: dict[str, Any] = {"type": type(error).__name__ if error is not None else None}
        if expose_details and error is not None:
            err["message"] = shown_message(error, expose_details=True)
        if hook_error is not None:
            err["hook_error_type"] = type(hook_error).__name__
            if expose_details:
                err["hook_error_message"] = shown_message(hook_error, expose_details=True)
        if isinstance(error, ExecutionError) and error.cause:  # an inner run stopped with its own report
            err["cause"] = {str(k): v for k, v in error.cause.items()}  # where and why, as that report said
            inner = _root_cause(error)
            if expose_details and inner is not None:
                err["cause"]["message"] = shown_message(inner, expose_details=True)
        meta = classification.metadata if classification is not None and classification.metadata else {}
        why_not = _not_retried(error, severity, reason)
        report: dict[str, Any] = {
            "severity": severity.value,
            "reason": reason,
            "route": route,
            "capability": capability,
            "path": "/".join(path),
            "operation": operation,
            "error": err,
            "attempts": attempts,
            "elapsed_s": round(elapsed_s, 6),
            "counters": dict(counters or {}),
            "steps": [s.as_dict() for s in steps],
            "suggestions": suggestions,
            "user_message": user_message_for(classification, reason),
            "metadata": {str(k): _safe_str(v) for k, v in meta.items()},
        }
        if why_not is not None:
            report["not_retried"] = why_not
        return report
    except Exception as exc:  # the report must never be the thing that fails
        log.error("building the error report failed", error_type=type(exc).__name__)
        return {
            "severity": "critical",
            "reason": reason if isinstance(reason, str) else "critical",
            "operation": operation if isinstance(operation, str) else "unknown",
            "error": {"type": type(error).__name__ if error is not None else None},
            "user_message": GENERIC_USER_MESSAGE,
            "steps": [],
            "suggestions": [],
        }


_EXPLAIN_SYSTEM = (
    "A request could not be completed. In at most two short sentences, explain to the end user what went "
    "wrong and what they can do. Do not mention internal names, error types, code or models."
)


async def explain_report(report: Mapping[str, Any], model: Model, *, timeout_s: float) -> str | None:
    """A short model-written explanation of ``report`` for the user, or ``None``.

    Returns ``None`` when the model fails, answers with nothing, or takes longer than
    ``timeout_s``; never raises (cancellation of the enclosing scope still propagates).
    """
    text, _ = await explain_report_usage(report, model, timeout_s=timeout_s)
    return text


async def explain_report_usage(
    report: Mapping[str, Any], model: Model, *, timeout_s: float
) -> tuple[str | None, Usage]:
    """:func:`explain_report` and what its model call used (a run counts it in its usage)."""
    done = [f["operation"] for f in report.get("steps", ()) if f.get("ok")]
    failed = [f["operation"] for f in report.get("steps", ()) if not f.get("ok")]
    summary = (
        f"What worked: {', '.join(done) or 'nothing'}. What failed: {', '.join(failed) or report.get('operation')}. "
        f"Why it stopped: {report.get('reason')}. Message prepared so far: {report.get('user_message')}"
    )
    request = ModelRequest(messages=(user(summary),), system=_EXPLAIN_SYSTEM, temperature=0.0, max_tokens=120)
    text: str | None = None
    used = NO_USAGE
    cut_off: list[Usage] = []
    own = False
    try:
        # a request the timeout cuts off was sent: the model reports it to this scope (the run counts it)
        with cut_requests() as cut_off, anyio.move_on_after(timeout_s):
            try:
                response = await model.request(request)
                text, used = response.text.strip() or None, response.usage
            except Exception as exc:  # its requests still count
                used = spent_usage(exc) or NO_USAGE
                log.warning("error explanation failed", error_type=type(exc).__name__)
        own = True
    finally:
        if not own:  # cut by an enclosing scope: its owner counts the request
            for cut in cut_off:
                spent_when_cut(cut)
    for cut in cut_off:
        used = used + cut
    return text, used
