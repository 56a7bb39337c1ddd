"""Failed attempts in the journal: how a step's exception is written down and raised again.

A run that ends on a failed step — a recovery stop after a stream broke mid-way, a step
whose retries ran out — completes with the failure as its outcome (status
``"critical"``), but no step result was recorded for that step. Resuming the completed
run must give the same result with no model call, so each failed attempt is written as a
``step.failed`` record, and a replay of a *completed* run raises it again at the same
step, after the text the model had streamed, in the order the attempts failed. The
recovery ladder then decides as it decided the first time.

A replayed failure keeps what the ladder read: the judgements the ladders made of it, in
order (severity, user message, metadata, a hook's own error; after any ``classify_error``
hook: the record is written with the run's next entry, once the ladders have judged the
failure), the HTTP status, ``Retry-After`` and whether the adapter had spent its retries,
and the usage a failed step had spent (``spent_usage``: its requests, the paid replies of a
classifier), counted again by the replay as the run counted it.
:class:`~jeeves_router.errors.ModelError` (and :class:`~jeeves_router.errors.StreamInterrupted`)
and built-in exceptions come back with their type; any other exception comes back as a
:class:`ReplayedError` subclass with the original type's name. Either way the replay's
ladders are given the recorded judgements instead of asking their hooks again
(:func:`~jeeves_router.recovery.classify.classify_failure`): a hook matching the user's own
class, an attribute or a message would not match the stand-in, and its answer's message
and metadata reach the reclassification prompt and the report. So a resumed run decides as
the run did, the same way for every exception type.

The run's time limit (``Recovery(time_limit_s=...)``) is the one input of the ladder a
replay does not reproduce: the replay's clock is not the run's. Where the limit ended an
attempt — before it started, during it (the time box cut it off, so no step recorded a
failure) or after it failed (its failure was judged past the limit) — is written as a
``step.failed`` record too (:func:`limit_record`, keyed by the ladder's attempt count, with
what the model calls the time box cut off had spent), and
the replay's ladder asks for it instead of reading the clock
(:meth:`~jeeves_router.runtime.Runtime.recorded_limit`): it stops where the run stopped.

Replaying an *unfinished* run (after a crash) serves no failure: its failed steps run
live again, as before.

An exception's message (and a hook's own error's) is recorded only when a ladder that judged
it ran under ``Recovery(expose_details=True)``: its prompts showed the message, so a replay
must raise it again with it. Otherwise the record names the type and keeps an empty message
(:mod:`jeeves_router._shown`): the message may quote a secret, and nothing showed it.
"""

from __future__ import annotations

import builtins
import functools
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic_core import to_jsonable_python

from .._shown import shown_message
from ..classify.types import with_spent_usage
from ..errors import ModelError, RunError, StreamInterrupted
from ..recovery.classify import decided_severity, default_classification, is_exposed, judgements, mark_replayed
from ..recovery.severity import ErrorClassification
from ..usage import Usage
from .records import Entry, StepFailedRecord, digest

if TYPE_CHECKING:
    from ..runtime import LimitWhen, StepKey

__all__ = [
    "PendingFailure",
    "RecordedFailures",
    "ReplayedError",
    "failure_record",
    "limit_digest",
    "limit_record",
    "replayed_error",
]

#: A shown message is recorded up to this many characters (a replay raises it again as recorded).
_MESSAGE_LIMIT = 100_000
_MODEL_ERRORS: dict[str, type[ModelError]] = {"ModelError": ModelError, "StreamInterrupted": StreamInterrupted}


class ReplayedError(RunError):
    """A recorded failure of a type that cannot be rebuilt, raised again by a replay.

    It is raised as a subclass named after the original type (so events, reports and the
    feedback a classifier or planner is shown read as they did); ``severity`` is the one
    the ladder acted on, and ``metadata["error_type"]`` names the original type too.
    """


@functools.lru_cache(maxsize=256)
def _replayed_class(name: str) -> type[ReplayedError]:
    """A :class:`ReplayedError` subclass called ``name`` (one per name)."""
    return type(name, (ReplayedError,), {"__module__": __name__, "__doc__": f"{name}, replayed from a journal."})


def failure_record(
    name: str,
    index: int,
    digest: str,
    attempt: int,
    exc: Exception,
    chunks: Sequence[str] = (),
    claim: str | None = None,
) -> StepFailedRecord:
    """The ``step.failed`` record of ``exc``, raised by attempt ``attempt`` of step ``(index, digest)``.

    ``claim`` is a failed tool call's claim (its ``tool.started`` entry's): that call's
    outcome is known, so a retry or a resume calls the tool again instead of applying
    ``on_unknown_tool_outcome``.
    """
    shown = is_exposed(exc)  # only a ladder under Recovery(expose_details=True) showed the message (_shown)
    message = shown_message(exc, expose_details=shown, limit=_MESSAGE_LIMIT)
    spent = getattr(exc, "spent_usage", None)
    return StepFailedRecord(
        name=name,
        index=index,
        digest=digest,
        attempt=attempt,
        chunks=list(chunks),
        error_type=type(exc).__name__,
        message=message,
        severity=(decided_severity(exc) or default_classification(exc).severity).value,
        status_code=getattr(exc, "status_code", None) if isinstance(exc, ModelError) else None,
        retry_after_s=getattr(exc, "retry_after_s", None) if isinstance(exc, ModelError) else None,
        retries_exhausted=bool(getattr(exc, "retries_exhausted", False)),
        spent_usage=asdict(spent) if isinstance(spent, Usage) else None,
        judgements=[_judgement(c, shown) for c in judgements(exc)],
        claim=claim,
    )


def _judgement(c: ErrorClassification, shown: bool) -> dict[str, Any]:
    """A ladder's classification as JSON (metadata that is not JSON-ready is kept as text).

    The message of a hook's own error is kept only when details were shown (``shown``).
    """
    hook_error = None
    if c.hook_error is not None:
        hook_message = shown_message(c.hook_error, expose_details=shown, limit=_MESSAGE_LIMIT)
        hook_error = {"type": type(c.hook_error).__name__, "message": hook_message}
    metadata = to_jsonable_python(dict(c.metadata), fallback=str) if c.metadata is not None else None
    return {
        "severity": c.severity.value,
        "user_message": c.user_message,
        "metadata": metadata,
        "hook_error": hook_error,
    }


def _classification(data: dict[str, Any]) -> ErrorClassification:
    """A recorded judgement, to be given again to the replay's ladder."""
    hook = data.get("hook_error")
    hook_error = _stand_in(hook["type"], hook["message"], "critical") if hook else None
    return ErrorClassification(data["severity"], data.get("user_message"), data.get("metadata"), hook_error)


def limit_digest(name: str, attempt: int) -> str:
    """The digest a time-limit record of the ladder's attempt ``attempt`` of ``name`` is keyed by."""
    return digest({"name": name, "attempt": attempt})


def limit_record(
    key: StepKey, run_attempt: int, attempt: int, when: LimitWhen, spent: Usage | None = None
) -> StepFailedRecord:
    """The ``step.failed`` record of the run's time limit ending the ladder's attempt ``attempt`` (``when``).

    ``spent``: what the model calls the time box cut off had spent (``spent_usage``).
    """
    return StepFailedRecord(
        name=key.name,
        index=key.index,
        digest=limit_digest(key.name, attempt),
        attempt=run_attempt,
        error_type="TimeLimit",
        message=f"the run's time limit was spent {when} attempt {attempt}",
        severity="critical",
        limit=when,
        spent_usage=asdict(spent) if spent is not None else None,
    )


@dataclass(frozen=True, slots=True)
class PendingFailure:
    """A failed attempt waiting for the run's next write.

    Written after the recovery ladder has classified the exception, so the record keeps
    the severity the ladder acted on (``classify_error`` hooks included).
    """

    key: StepKey
    digest: str
    attempt: int
    error: Exception
    chunks: tuple[str, ...]
    claim: str | None = None

    def entry(self) -> Entry:
        """The ``step.failed`` entry, as the failure is judged now."""
        k = self.key
        rec = failure_record(k.name, k.index, self.digest, self.attempt, self.error, self.chunks, self.claim)
        return Entry(session_id=k.session_id, run_id=k.run_id, record=rec)


def replayed_error(rec: StepFailedRecord) -> Exception:
    """The exception ``rec`` records, rebuilt to be raised again (see the module docstring).

    It is marked as replayed: the recovery ladder decides on it as it did, without waiting
    its backoff again.
    """
    exc = _rebuilt(rec)
    mark_replayed(exc, [_classification(j) for j in rec.judgements])
    if rec.spent_usage is not None:
        with_spent_usage(exc, Usage(**rec.spent_usage))
    return exc


def _rebuilt(rec: StepFailedRecord) -> Exception:
    """``rec``'s exception: its own type when it can be rebuilt, else a same-named :class:`ReplayedError`."""
    model_error = _MODEL_ERRORS.get(rec.error_type)
    if model_error is not None:
        err = model_error(
            rec.message, severity=rec.severity, status_code=rec.status_code, retry_after_s=rec.retry_after_s
        )
        err.retries_exhausted = rec.retries_exhausted
        return err
    builtin = getattr(builtins, rec.error_type, None)
    if isinstance(builtin, type) and issubclass(builtin, Exception):
        try:
            plain = builtin(rec.message)
        except Exception:  # a built-in whose constructor wants more than a message
            plain = None
        if plain is not None:  # the same type: a hook that matched it matches it again
            return plain
    return _stand_in(rec.error_type, rec.message, rec.severity)


def _stand_in(error_type: str, message: str, severity: str) -> ReplayedError:
    """A :class:`ReplayedError` named ``error_type`` (when it is a name) for an exception that cannot be rebuilt."""
    cls = _replayed_class(error_type) if error_type.isidentifier() else ReplayedError
    return cls(message, severity=severity, metadata={"error_type": error_type})


@dataclass(slots=True)
class RecordedFailures:
    """The ``step.failed`` records of one run, by step, and how many a replay has raised again.

    Attributes:
        attempt: The completed run attempt whose failures a replay raises again (``None``:
            the run being replayed never completed; no failure is replayed).
    """

    attempt: int | None = None
    by_step: dict[tuple[int, str], list[StepFailedRecord]] = field(default_factory=dict)
    served: dict[tuple[int, str], int] = field(default_factory=dict)

    def add(self, rec: StepFailedRecord) -> None:
        """Index one record."""
        self.by_step.setdefault((rec.index, rec.digest), []).append(rec)

    def next(self, index: int, digest: str) -> StepFailedRecord | None:
        """The next failure of step ``(index, digest)`` recorded by the completed attempt, each once."""
        if self.attempt is None or not self.by_step:
            return None
        k = (index, digest)
        failures = [f for f in self.by_step.get(k, ()) if f.attempt == self.attempt]
        n = self.served.get(k, 0)
        if n >= len(failures):
            return None
        self.served[k] = n + 1
        return failures[n]
