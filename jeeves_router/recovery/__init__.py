"""The recovery layer: severities, failure classification, the escalation ladder, reports.

This package decides; architectures act and emit the events. See
:mod:`jeeves_router.recovery.run` for the per-run plumbing they share. Each name is imported
from its module on first use, so configuring recovery does not load the reports or the run
plumbing until a run needs them.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .classify import ErrorContext, ErrorHook, classify_failure, default_classification
    from .config import Recovery, Sleep
    from .ladder import Action, Counters, Decision, Limits, budget_exceeded, next_action
    from .report import GENERIC_USER_MESSAGE, StepRecord, build_report, explain_report, user_message_for
    from .severity import ErrorClassification, ErrorSeverity, ExecutionError

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        ".classify": ("ErrorContext", "ErrorHook", "classify_failure", "default_classification"),
        ".config": ("Recovery", "Sleep"),
        ".ladder": ("Action", "Counters", "Decision", "Limits", "budget_exceeded", "next_action"),
        ".report": ("GENERIC_USER_MESSAGE", "StepRecord", "build_report", "explain_report", "user_message_for"),
        ".severity": ("ErrorClassification", "ErrorSeverity", "ExecutionError"),
    },
)

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
