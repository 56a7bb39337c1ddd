"""From an exception to an :class:`ErrorClassification`: hooks first, then defaults by type.

Hooks have the signature ``classify_error(exc, context) -> ErrorClassification | None``;
``None`` means "use the next hook, or the default". The most specific hook is asked
first (capability or route, then agent, then the :class:`Recovery` config). A hook that
raises makes the failure CRITICAL, keeping both exceptions (the hook's in
``hook_error``, the original as ``__context__`` of the hook's).

Defaults by type:

* an exception already judged FATAL by an inner architecture → FATAL (stays fatal);
* :class:`UsageError` (misuse of the API inside a run) → FATAL: no retry can fix code;
* any :class:`RunError` (``ModelError`` from the adapters included) → its ``severity``;
* ``TimeoutError``, ``ConnectionError``, any ``OSError``, and transport errors of HTTP
  clients (matched by class name: ``httpx.TimeoutException``, ``APIConnectionError``,
  ...) → RETRIABLE;
* ``ValueError``, ``TypeError``, pydantic ``ValidationError`` → CRITICAL;
* anything else → CRITICAL.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._log import get_logger
from ..errors import RunError, UsageError
from .severity import ErrorClassification, ErrorSeverity, as_severity

__all__ = [
    "ErrorContext",
    "ErrorHook",
    "classify_failure",
    "default_classification",
    "mark_fatal",
    "is_marked_fatal",
    "remember_severity",
    "decided_severity",
    "mark_replayed",
    "is_replayed",
]

log = get_logger(__name__)

#: ``(exc, context) -> ErrorClassification | None``.
ErrorHook = Callable[[BaseException, "ErrorContext"], "ErrorClassification | None"]

_TRANSPORT_NAMES = frozenset(
    {
        "TimeoutException",
        "TransportError",
        "NetworkError",
        "ConnectError",
        "ReadError",
        "WriteError",
        "ReadTimeout",
        "ConnectTimeout",
        "PoolTimeout",
        "RemoteProtocolError",
        "APIConnectionError",
        "APITimeoutError",
    }
)
_FATAL_MARK = "__jeeves_fatal__"
_SEVERITY_MARK = "__jeeves_severity__"
_REPLAYED_MARK = "__jeeves_replayed__"


@dataclass(frozen=True, slots=True)
class ErrorContext:
    """What a ``classify_error`` hook knows about the failure.

    Attributes:
        operation: The failed step, e.g. ``"model"``, ``"classify"``, ``"route:billing"``,
            ``"capability:sql"``, ``"plan"``.
        attempt: The 1-based attempt of that step that failed.
        session_id: Session id of the agent whose step failed.
        path: Its route path.
        route: The route involved, if any.
        capability: The capability involved, if any.
        variables: The run's context variables (read-only).
    """

    operation: str
    attempt: int = 1
    session_id: str = ""
    path: tuple[str, ...] = ()
    route: str | None = None
    capability: str | None = None
    variables: Mapping[str, Any] = field(default_factory=dict)


def mark_fatal(exc: BaseException) -> None:
    """Remember that ``exc`` was judged FATAL, so enclosing architectures abort too."""
    try:
        setattr(exc, _FATAL_MARK, True)
    except (AttributeError, TypeError):  # exceptions with __slots__: nothing to remember on
        pass


def remember_severity(exc: BaseException, severity: ErrorSeverity) -> None:
    """Remember the severity the ladder acted on for ``exc`` (read back by :func:`decided_severity`)."""
    try:
        setattr(exc, _SEVERITY_MARK, severity)
    except (AttributeError, TypeError):  # exceptions with __slots__: nothing to remember on
        pass


def decided_severity(exc: BaseException) -> ErrorSeverity | None:
    """The severity the recovery ladder last acted on for ``exc`` (``None``: never classified).

    The journal records it with a failed step, so a replay decides the same way.
    """
    found = getattr(exc, _SEVERITY_MARK, None)
    return found if isinstance(found, ErrorSeverity) else None


def mark_replayed(exc: BaseException) -> None:
    """Mark ``exc`` as a recorded failure raised again by a journal replay (no backoff is waited for it)."""
    try:
        setattr(exc, _REPLAYED_MARK, True)
    except (AttributeError, TypeError):  # exceptions with __slots__: nothing to remember on
        pass


def is_replayed(exc: BaseException) -> bool:
    """True for a failure a journal replay raised again (see :func:`mark_replayed`)."""
    return bool(getattr(exc, _REPLAYED_MARK, False))


def is_marked_fatal(exc: BaseException) -> bool:
    """True when an inner architecture already judged ``exc`` FATAL."""
    return bool(getattr(exc, _FATAL_MARK, False))


def _is_transport(exc: BaseException) -> bool:
    return any(cls.__name__ in _TRANSPORT_NAMES for cls in type(exc).__mro__)


def _is_validation(exc: BaseException) -> bool:
    try:
        from pydantic import ValidationError
    except ImportError:  # pragma: no cover - pydantic is a dependency
        return False
    return isinstance(exc, ValidationError)


def default_classification(exc: BaseException) -> ErrorClassification:
    """The severity of ``exc`` by its type (see the module docstring). Never raises."""
    if is_marked_fatal(exc):
        return ErrorClassification(ErrorSeverity.FATAL)
    if isinstance(exc, UsageError):
        return ErrorClassification(ErrorSeverity.FATAL)
    if isinstance(exc, RunError):
        try:
            return ErrorClassification(as_severity(exc.severity))
        except UsageError:
            return ErrorClassification(ErrorSeverity.CRITICAL, metadata={"unknown_severity": str(exc.severity)})
    if isinstance(exc, (TimeoutError, ConnectionError, OSError)) or _is_transport(exc):
        return ErrorClassification(ErrorSeverity.RETRIABLE)
    return ErrorClassification(ErrorSeverity.CRITICAL)


def classify_failure(
    exc: BaseException, context: ErrorContext, hooks: Sequence[ErrorHook | None] = ()
) -> ErrorClassification:
    """Classify ``exc``: the first hook that answers wins, else the default.

    A FATAL judgement made by an inner architecture cannot be softened by a hook. A hook
    that raises gives CRITICAL with ``hook_error`` set; one that returns something other
    than an :class:`ErrorClassification` or ``None`` is treated the same way.
    """
    if is_marked_fatal(exc):
        return ErrorClassification(ErrorSeverity.FATAL)
    for hook in hooks:
        if hook is None:
            continue
        try:
            answer = hook(exc, context)
            if answer is not None and not isinstance(answer, ErrorClassification):
                raise TypeError(
                    f"classify_error hook returned {type(answer).__name__}; return an ErrorClassification or None"
                )
        except Exception as hook_exc:
            if hook_exc.__context__ is None:
                hook_exc.__context__ = exc
            log.warning(
                "classify_error hook raised",
                operation=context.operation,
                error_type=type(exc).__name__,
                hook_error_type=type(hook_exc).__name__,
            )
            return ErrorClassification(
                ErrorSeverity.CRITICAL,
                metadata={"hook_error_type": type(hook_exc).__name__},
                hook_error=hook_exc,
            )
        if answer is not None:
            return answer
    return default_classification(exc)
