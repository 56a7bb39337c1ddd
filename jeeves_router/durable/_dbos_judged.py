"""How the recovery ladders judged a DBOS step's failure, checkpointed as a step of its own.

A failed step is checkpointed when it fails (:mod:`._dbos_runtime`), before any recovery
ladder has judged it: a ``classify_error`` hook answers afterwards, and so does the run's time
limit. A recovered (or forked) workflow that raises the failure again from its checkpoint
must decide as the run decided — a hook may answer otherwise the second time (a counter, the
time, a model asked to judge) or not recognise the stand-in of an error type of the user's
own, and the recovered run's clock is not the run's — so the judgement is checkpointed too,
as the step ``<name>.judged`` that follows the failed step:

- Live, the failure waits in :class:`Judgements` until the workflow's next step (or the end of
  the run), by when every ladder has judged it; that step first checkpoints the judgement (its
  step id drawn before the step's own, :meth:`Judgements.reserve`): the
  failure's ``step.failed`` record as a journal writes it (severity, the ladders' judgements).
  Where a ladder's time limit stopped the run waits there too, after the failure, and is
  checkpointed in the same order (:mod:`._dbos_limits`).
- Raising a failure again from its checkpoint, the runtime reads the ``.judged`` step at once
  and gives the ladders its judgements instead of asking their hooks. A worker that died
  between the failure and its judgement left no ``.judged`` checkpoint: the step then
  checkpoints "not judged" and the ladders judge the failure now, and that judgement is
  checkpointed as a further ``.judged`` step, which a later recovery reads after the first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from dbos import DBOS, StepReservation

from ..errors import ReplayDivergence
from ..journal.failures import failure_record, replayed_error
from ..journal.records import StepFailedRecord
from ..runtime import StepKey
from ._dbos_limits import LIMIT_STEP, LimitNote

__all__ = ["Judgements"]


@dataclass(frozen=True, slots=True)
class _Unjudged:
    """A failure of this execution, waiting to be judged and checkpointed."""

    key: StepKey
    digest: str
    error: Exception
    chunks: tuple[str, ...]


class Judgements:
    """The failures of each running workflow whose judgement is not checkpointed yet, and its limit stops.

    Args:
        draw: Draws the workflow's next step id (no await).
    """

    def __init__(self, draw: Callable[[], StepReservation]) -> None:
        self._draw = draw
        self._waiting: dict[str, list[_Unjudged | LimitNote]] = {}

    def wait(self, key: StepKey, d: str, error: Exception, chunks: Sequence[str] = ()) -> None:
        """Keep ``error`` (step ``key``, input digest ``d``) for :meth:`checkpoint`, by when the ladders judged it."""
        wid = DBOS.workflow_id
        if wid is not None:
            self._waiting.setdefault(wid, []).append(_Unjudged(key, d, error, tuple(chunks)))

    def hold(self, note: LimitNote) -> None:
        """Keep a limit stop of this execution for :meth:`checkpoint`, after the failures already waiting."""
        wid = DBOS.workflow_id
        if wid is not None:
            self._waiting.setdefault(wid, []).append(note)

    def forget(self) -> None:
        """Drop what this workflow's execution still holds (it ended without checkpointing it)."""
        wid = DBOS.workflow_id
        if wid is not None:
            self._waiting.pop(wid, None)

    def reserve(self) -> list[tuple[_Unjudged | LimitNote, StepReservation]]:
        """Draw a step id for the judgement of each failure this workflow's execution holds (no await).

        The ids follow the failed steps at once, before any other step's id is drawn: a replay
        reads each judgement right after its failure (:meth:`replayed`), and a step of another
        task of the workflow must not take an id in between (capabilities are selected in parallel).
        """
        wid = DBOS.workflow_id
        waiting = self._waiting.pop(wid, None) if wid is not None else None
        return [(u, self._draw()) for u in waiting or ()]

    async def write(self, reserved: list[tuple[_Unjudged | LimitNote, StepReservation]]) -> None:
        """Checkpoint what :meth:`reserve` drew ids for: judgements as ``<name>.judged``, stops as ``<name>.limit``."""
        for u, at in reserved:
            if isinstance(u, LimitNote):
                await _write_limit(u, at)
                continue
            k = u.key
            rec = failure_record(k.name, k.index, u.digest, 1, u.error, u.chunks)
            judged = {"digest": u.digest, "failed": rec.model_dump(mode="json")}

            async def judgement(judged: dict[str, Any] = judged) -> dict[str, Any]:
                return judged

            out = await at.run_async({"name": f"{k.name}.judged"}, judgement)
            _check(k, u.digest, out)

    async def checkpoint(self) -> None:
        """Checkpoint the judgement of each failure this workflow's execution holds (:meth:`reserve`, :meth:`write`)."""
        await self.write(self.reserve())

    async def replayed(self, key: StepKey, d: str, rec: StepFailedRecord) -> Exception:
        """The failure ``rec`` (checkpointed by step ``key``) to raise again, with its checkpointed judgement.

        Without one (its worker died before it), the ladders judge it now: it waits for
        :meth:`checkpoint` as a live failure does.
        """
        while True:
            made = False

            async def not_judged() -> dict[str, Any]:
                nonlocal made
                made = True
                return {"digest": d, "failed": None}

            out = await self._draw().run_async({"name": f"{key.name}.judged"}, not_judged)
            _check(key, d, out)
            if out["failed"] is not None:
                return replayed_error(StepFailedRecord.model_validate(out["failed"]))
            if made:
                exc = replayed_error(rec)
                self.wait(key, d, exc, rec.chunks)
                return exc
            # an earlier recovery found no judgement either; its own follows


async def _write_limit(note: LimitNote, at: StepReservation) -> None:
    out = note.checkpoint()

    async def stop() -> dict[str, Any]:
        return out

    await at.run_async({"name": f"{note.key.name}{LIMIT_STEP}"}, stop)


def _check(key: StepKey, d: str, out: dict[str, Any]) -> None:
    if out.get("digest") != d:
        raise ReplayDivergence(
            f"workflow {DBOS.workflow_id}: the judgement of step {key.index} ({key.name}) of session "
            f"{key.session_id!r} was checkpointed for another input; workflow code must be deterministic",
            metadata={"workflow_id": DBOS.workflow_id, "step": key.index},
        )
