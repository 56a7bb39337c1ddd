"""Severities, the classification of a failure, and the error a step raises to choose one.

The five severities, from mildest to harshest:

* ``RETRIABLE`` — the same step again after a backoff, up to its retry policy.
* ``REPLANNING`` — ask the orchestrator for a new plan (capability architectures).
* ``RECLASSIFICATION`` — classify again (route or capabilities) with the failure in the
  prompt and the failed route or capability excluded.
* ``CRITICAL`` — stop gracefully with an error report.
* ``FATAL`` — abort at once, from anywhere: the original exception is raised.

Their values are the plain strings :class:`~jeeves_router.errors.RunError` carries in
``severity``, so ``ErrorSeverity(run_error.severity)`` always works.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from pydantic_core import to_jsonable_python

from ..errors import RunError, UsageError

__all__ = ["ErrorSeverity", "ErrorClassification", "ExecutionError", "as_severity"]


class ErrorSeverity(str, Enum):
    """How bad a failure is, and so what the recovery ladder does next."""

    RETRIABLE = "retriable"
    REPLANNING = "replanning"
    RECLASSIFICATION = "reclassification"
    CRITICAL = "critical"
    FATAL = "fatal"

    def __str__(self) -> str:
        return self.value


def as_severity(value: ErrorSeverity | str) -> ErrorSeverity:
    """``value`` as an :class:`ErrorSeverity`; raises UsageError for an unknown string."""
    if isinstance(value, ErrorSeverity):
        return value
    try:
        return ErrorSeverity(str(value).lower())
    except ValueError:
        names = ", ".join(s.value for s in ErrorSeverity)
        raise UsageError(f"unknown severity {value!r}; use one of: {names}") from None


@dataclass(frozen=True, slots=True)
class ErrorClassification:
    """What a ``classify_error`` hook (or the default) says about a failure.

    Attributes:
        severity: The severity deciding the next step of the ladder.
        user_message: A message safe to show to the user (no internals); a generic one
            is used when ``None``.
        metadata: Extra, secret-free context for the report and for the model.
        hook_error: When the hook itself raised, its exception (the classification is
            then CRITICAL and the original failure is kept as well).

    Raises:
        UsageError: For an unknown severity, a ``user_message`` that is not a string, or
            ``metadata`` that is not a mapping.
    """

    severity: ErrorSeverity
    user_message: str | None = None
    metadata: Mapping[str, Any] | None = None
    hook_error: BaseException | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "severity", as_severity(self.severity))
        if self.user_message is not None and not isinstance(self.user_message, str):
            raise UsageError(
                f"ErrorClassification: user_message must be a string or None, got {self.user_message!r:.60}"
            )
        if self.metadata is not None and not isinstance(self.metadata, Mapping):
            raise UsageError(
                f"ErrorClassification: metadata must be a mapping, e.g. {{'order': 42}}, got {self.metadata!r:.60}"
            )

    def format_for_llm(self) -> str:
        """The failure as a reclassification or replanning prompt shows it.

        Deterministic: the severity, the user message, then the metadata sorted by key. A
        value is shown as it reads after a trip through the journal (text and numbers as
        they are, containers as sorted JSON, other objects by their ``str``), so a resumed
        run shows the classifier the same prompt and replays its answer.
        """
        lines = [f"Previous attempt failed (severity: {self.severity.value})."]
        if self.user_message:
            lines.append(f"Reason: {self.user_message}")
        for key in sorted(self.metadata or {}, key=str):
            lines.append(f"{key}: {_shown((self.metadata or {})[key])}")
        return "\n".join(lines)


def _shown(value: Any) -> str:
    """``value`` as :meth:`ErrorClassification.format_for_llm` shows it, the same live and replayed.

    The journal keeps metadata as JSON (a tuple comes back as a list, an object as its text),
    so everything but a scalar is shown by its JSON form.
    """
    if value is None or isinstance(value, (str, int, float, bool)):
        return str(value)
    data = to_jsonable_python(value, fallback=str)
    return data if isinstance(data, str) else json.dumps(data, sort_keys=True, ensure_ascii=False)


class ExecutionError(RunError):
    """A capability or step failed and says how severe the failure is.

    Args:
        severity: An :class:`ErrorSeverity` (or its string value).
        message: What failed, for developers and logs.
        capability_name: The capability (or route) that failed, if any.
        metadata: Extra, secret-free context.
        cause: Where an inner run's recovery stopped it, when this failure passes that on:
            ``type`` (the error's class name), ``operation`` (the inner step), ``reason``,
            ``severity``, ``path``. The recovery report shows it as ``error.cause``, with the
            message of the exception chained as ``__cause__`` when details are exposed.

    Example:
        Raised by a capability or a tool; the recovery ladder reads its severity:

        >>> from jeeves_router.recovery import ErrorSeverity, ExecutionError
        >>> error = ExecutionError(ErrorSeverity.REPLANNING, "no data for that range", capability_name="sql")
        >>> error.error_severity, error.capability_name, str(error)
        (<ErrorSeverity.REPLANNING: 'replanning'>, 'sql', 'no data for that range')
        >>> error.severity  # the plain string every RunError carries
        'replanning'
    """

    def __init__(
        self,
        severity: ErrorSeverity | str,
        message: str,
        capability_name: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        *,
        cause: Mapping[str, Any] | None = None,
    ) -> None:
        sev = as_severity(severity)
        super().__init__(message, severity=sev.value, metadata=metadata)
        self.error_severity = sev
        self.capability_name = capability_name
        self.cause: dict[str, Any] | None = dict(cause) if cause else None
