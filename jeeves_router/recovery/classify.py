"""From an exception to an :class:`ErrorClassification`: hooks first, then defaults by type.

Hooks have the signature ``classify_error(exc, context) -> ErrorClassification | None``;
``None`` means "use the next hook, or the default". The most specific hook is asked
first (capability or route, then agent, then the :class:`Recovery` config). A hook that
raises makes the failure CRITICAL, keeping both exceptions (the hook's in
``hook_error``, the original as ``__context__`` of the hook's).

A hook's RETRIABLE is a judgement, not an order: the ladder does not retry, whatever a hook
answers, a failure whose text already reached the consumer (a
:class:`~jeeves_router.errors.StreamInterrupted`, or any failure of a streamed attempt after its
first text: a retry would send that text again) nor a model call whose adapter already spent its
own retries (``retries_exhausted``: one retry layer per model call, the adapter's). The run
then stops ``critical`` with the report's ``reason`` (``output_started``,
``retries_exhausted``) and its ``not_retried``, which says why the RETRIABLE was not followed.

A failure a journal replay raises again (:func:`mark_replayed`) is not given to the hooks
again: it carries the judgements the run made of it, in order (one per ladder that judged
it), and each ladder takes the next (:func:`remember_classification`). A hook matches the
user's own exception classes, attributes and messages, which the replayed stand-in does not
have; its answer (severity, user message, metadata) is what a replay must reproduce.

Defaults by type:

* an exception already judged FATAL by an inner architecture → FATAL (stays fatal);
* an exception an inner architecture escalated → what it judged there, when no hook here answers;
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
    "append_mark",
    "marks",
    "remember_classification",
    "judgements",
    "decided_severity",
    "mark_replayed",
    "is_replayed",
]

log = get_logger(__name__)

#: ``(exc, context) -> ErrorClassification | None``. A RETRIABLE answer is not followed once the failed
#: attempt's text reached the consumer, nor for a model call its adapter gave up on (module docstring).
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
_JUDGED_MARK = "__jeeves_judged__"
_REPLAYED_MARK = "__jeeves_replayed__"
_RECORDED_MARK = "__jeeves_recorded__"
_EXPOSED_MARK = "__jeeves_exposed__"


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


def append_mark(exc: BaseException, mark: str, value: Any) -> None:
    """Add ``value`` to the list ``exc`` keeps under ``mark`` (one entry per ladder that judged it)."""
    kept = getattr(exc, mark, None)
    try:
        if isinstance(kept, list):
            kept.append(value)
        else:
            setattr(exc, mark, [value])
    except (AttributeError, TypeError):  # exceptions with __slots__: nothing to remember on
        pass


def marks(exc: BaseException, mark: str) -> list[Any]:
    """A copy of the list ``exc`` keeps under ``mark`` (see :func:`append_mark`); empty when none."""
    kept = getattr(exc, mark, None)
    return list(kept) if isinstance(kept, list) else []


def remember_classification(exc: BaseException, classification: ErrorClassification) -> None:
    """Remember a ladder's judgement of ``exc``, after those already made (see :func:`judgements`)."""
    append_mark(exc, _JUDGED_MARK, classification)


def judgements(exc: BaseException) -> list[ErrorClassification]:
    """The judgements the recovery ladders made of ``exc``, in order (a journal records them)."""
    return marks(exc, _JUDGED_MARK)


def decided_severity(exc: BaseException) -> ErrorSeverity | None:
    """The severity the recovery ladder last acted on for ``exc`` (``None``: never classified)."""
    judged = judgements(exc)
    return judged[-1].severity if judged else None


def mark_replayed(exc: BaseException, judged: Sequence[ErrorClassification] = ()) -> None:
    """Mark ``exc`` as a recorded failure raised again by a journal replay.

    No backoff is waited for it, and the ladders that judge it take ``judged`` (the run's
    judgements, in order) instead of asking their hooks.
    """
    try:
        setattr(exc, _REPLAYED_MARK, True)
        setattr(exc, _RECORDED_MARK, list(judged))
    except (AttributeError, TypeError):  # exceptions with __slots__: nothing to remember on
        pass


def mark_exposed(exc: BaseException) -> None:
    """Remember that a ladder that judged ``exc`` exposes its details (a journal then keeps its message)."""
    try:
        setattr(exc, _EXPOSED_MARK, True)
    except (AttributeError, TypeError):  # exceptions with __slots__: nothing to remember on
        pass


def is_exposed(exc: BaseException) -> bool:
    """True when a ladder under ``Recovery(expose_details=True)`` judged ``exc`` (see :func:`mark_exposed`)."""
    return bool(getattr(exc, _EXPOSED_MARK, False))


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

    A replayed failure gets the run's next recorded judgement instead (module docstring).

    A failure an inner architecture escalated keeps the judgement it made there unless a hook
    here answers: an enclosing Router's hooks need not know a specialist's exceptions, even
    through a Router without recovery in between.

    A FATAL judgement made by an inner architecture cannot be softened by a hook. A hook
    that raises gives CRITICAL with ``hook_error`` set; one that returns something other
    than an :class:`ErrorClassification` or ``None`` is treated the same way.
    """
    if is_marked_fatal(exc):
        return ErrorClassification(ErrorSeverity.FATAL)
    recorded = getattr(exc, _RECORDED_MARK, None)
    if recorded:  # a replayed failure: the run's own judgement, in the order the run made them
        return recorded.pop(0)  # type: ignore[no-any-return]
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
    judged = judgements(exc)
    if judged:  # escalated by an inner ladder, whose hooks knew it: its judgement, not the type's default
        return judged[-1]
    return default_classification(exc)
