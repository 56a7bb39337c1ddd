"""The recovery layer: severities, failure classification, the escalation ladder, reports.

This package decides; architectures act and emit the events. See
:mod:`jeeves_router.recovery.run` for the per-run plumbing they share.
"""

from .classify import ErrorContext, ErrorHook, classify_failure, default_classification
from .config import Recovery, Sleep
from .ladder import Action, Counters, Decision, Limits, budget_exceeded, next_action
from .report import GENERIC_USER_MESSAGE, StepRecord, build_report, explain_report, user_message_for
from .severity import ErrorClassification, ErrorSeverity, ExecutionError

__all__ = [
    "Action",
    "Counters",
    "Decision",
    "ErrorClassification",
    "ErrorContext",
    "ErrorHook",
    "ErrorSeverity",
    "ExecutionError",
    "GENERIC_USER_MESSAGE",
    "Limits",
    "Recovery",
    "Sleep",
    "StepRecord",
    "budget_exceeded",
    "build_report",
    "classify_failure",
    "default_classification",
    "explain_report",
    "next_action",
    "user_message_for",
]
