"""The requests a run's cut left waiting: journaled at their step, counted by the resume that makes it again.

A journaled run cut off (cancelled, its stream closed early) while a model request waits for
its answer records no result for that step: :meth:`Agent.resume` makes the request again. The
cut one was sent (the provider may bill it), and the cut run counted it (its ``run.end``
``cut`` usage, ``RunStream.spent``), so the resumed run counts it too, as it counts every
recorded turn it replays, and as a resumed run whose time limit cut a request does. The step
that was cut notes what its cut requests spent (reported to a
:func:`~jeeves_router.usage.cut_requests` scope, :func:`~jeeves_router.usage.spent_when_cut`);
the run's ``cut`` end writes it as a ``step.failed`` record marked ``cut`` (:func:`cut_record`:
never raised again, not a failure). A later attempt that performs the step (its input digest
the same) adds it to the step's result, or to its failure's ``spent_usage``
(:func:`with_carried`), once: the step's ``model`` record then holds it, so a replay of the
completed run counts it too. A step cut again is noted again: the next resume counts both.
A run whose process died wrote nothing: what its last request spent is not known.

The failed attempts before a step's recorded result are counted the same way, from their
``step.failed`` records (``spent_usage``): the attempt that failed and then got the result
counted them as they failed, and the result holds only its own request, so a resume that
replays the result adds the failures of the attempt that recorded it (step and model records
keep their ``attempt``; :meth:`~jeeves_router.journal.state.StepIndex.failed_before`), once
per execution: a resume resumed again reads the same records and counts them once again, not
twice. A replay of a completed run that raises the step's failures again counts them there
instead; a failure that sent nothing recorded no usage and adds none; a result recorded by an
earlier release (no ``attempt``) adds nothing. Failures of an attempt that never got the
step's result (it died or was cut before a retry succeeded) are not counted by the attempt
that makes the step again.
"""

from __future__ import annotations

from dataclasses import asdict, is_dataclass, replace
from typing import TYPE_CHECKING, TypeVar

from ..usage import NO_USAGE, Usage, with_spent_usage
from .records import StepFailedRecord

if TYPE_CHECKING:
    from ..runtime import StepKey

__all__ = ["cut_record", "with_carried"]

T = TypeVar("T")


def cut_record(key: StepKey, digest: str, attempt: int, spent: Usage) -> StepFailedRecord:
    """The record of what the cut of attempt ``attempt`` left waiting at step ``key`` (input digest ``digest``)."""
    return StepFailedRecord(
        name=key.name,
        index=key.index,
        digest=digest,
        attempt=attempt,
        error_type="Cut",
        message="the run was cut off while this step waited for its answer; its request was sent",
        severity="critical",
        spent_usage=asdict(spent),
        cut=True,
    )


def with_carried(result: T, carried: Usage | None) -> T:
    """``result`` with ``carried`` added to its usage: a dataclass's ``usage``, an exception's ``spent_usage``.

    A result with no usage of its own is returned as it is (the requests are not counted).
    """
    if carried is None or carried is NO_USAGE:
        return result
    if isinstance(result, BaseException):
        with_spent_usage(result, carried)
        return result
    used = getattr(result, "usage", None)
    if is_dataclass(result) and not isinstance(result, type) and isinstance(used, Usage):
        return replace(result, usage=used + carried)  # type: ignore[return-value,type-var]
    return result
