"""Where the run's time limit ended an attempt, kept in the checkpoints of a DBOS workflow.

The wall clock is the one input of the recovery ladder a recovered (or forked) workflow does
not reproduce, so a run records where its ``Recovery(time_limit_s=...)`` ended an attempt —
before it started, during it (the time box cut it off) or after it failed — through the
runtime port (:meth:`~jeeves_router.runtime.Runtime.record_limit`), and a recovered workflow
asks the port (:meth:`~jeeves_router.runtime.Runtime.recorded_limit`) instead of its own clock,
as a journal's ``Agent.resume`` does. DBOS answers from the workflow's checkpoints:

- Written once per stop, never per attempt: the ladder notes the stop synchronously, and the
  note waits, with the failures waiting for their judgement (:mod:`._dbos_judged`), for the
  workflow's next checkpoint — the next step, or the end of the run, before the workflow's
  result — which first checkpoints it as the step ``<limit key>.limit`` (``limit:model.limit``):
  the attempt's key and count, when, what the calls the time box cut off had spent and, for a
  cut, the ids of the steps the attempt had drawn. A worker that dies between the stop and that
  checkpoint loses the note, and nothing else: no step after the stop, and not the run's result,
  was checkpointed, so the recovered run decides there anew, as if the worker had died just
  before the stop (its own clock, measured from its own start).
- Read without a step: the ladder asks at the start of every attempt, before the checkpoint
  that holds the answer, so each execution reads the workflow's ``.limit`` checkpoints once
  (outside the workflow's own context: the read is not a step of it) and answers from them.
  An attempt without one that the run went on past (steps after it are checkpointed) was not
  ended by the limit (``""``: a slow replay does not stop earlier than the run did); past the
  last checkpoint, the recovered run reads its own clock (``None``), as a journal's resume of
  an unfinished run does.
- The same step ids: DBOS numbers a workflow's steps in order and replays the checkpoint of
  each number. A recovered run that replays a stop does not note it again, and a cut it replays
  raises at once, without the steps the run had drawn for the attempt (the call cut off has no
  checkpoint; a tool call's ``.started`` mark does). The ids of both are passed over
  (:meth:`RecordedLimits.draw`), so every later step is given the number of its checkpoint.
"""

from __future__ import annotations

import contextvars
import functools
from dataclasses import asdict, dataclass, field
from typing import Any

import anyio
import anyio.to_thread
from dbos import DBOS, StepReservation

from ..runtime import LimitWhen, RecordedLimit, StepKey
from ..usage import Usage

__all__ = ["LIMIT_STEP", "LimitNote", "RecordedLimits"]

LIMIT_STEP = ".limit"  # the suffix of a limit's checkpoint: ``<limit key name>.limit``

_NOT_ENDED = RecordedLimit("")  # the run's limit did not end this attempt
_AttemptKey = tuple[str, str, int, int]
_Found = tuple[int, RecordedLimit, tuple[int, ...]]  # the checkpoint's step id, the answer, the cut's step ids


def _key(key: StepKey, attempt: int) -> _AttemptKey:
    return key.session_id, key.name, key.index, attempt  # not the run id: a new one each execution


@dataclass(frozen=True, slots=True)
class LimitNote:
    """A stop of this execution, waiting for the workflow's next checkpoint (as ``<name>.limit``)."""

    key: StepKey
    attempt: int
    when: LimitWhen
    spent: Usage | None
    drawn: tuple[int, ...]

    def checkpoint(self) -> dict[str, Any]:
        """The output of its step."""
        k = self.key
        return {
            "session_id": k.session_id,
            "name": k.name,
            "index": k.index,
            "attempt": self.attempt,
            "when": self.when,
            "spent": asdict(self.spent) if self.spent is not None else None,
            "drawn": list(self.drawn),
        }


@dataclass(slots=True)
class _Execution:
    """What one execution of a workflow keeps (see :class:`RecordedLimits`)."""

    found: dict[_AttemptKey, list[_Found]] | None = None  # read at the first question
    last_recorded: int = 0  # the workflow's last checkpointed step id, then
    last_drawn: int = 0
    passed: set[int] = field(default_factory=set)
    drawn: dict[int, list[int]] = field(default_factory=dict)  # task -> the step ids it drew, in order
    began: dict[_AttemptKey, int] = field(default_factory=dict)  # attempt -> len(its task's drawn) then


class RecordedLimits:
    """For each running workflow: its recorded stops, the step ids to pass over, the ids its attempts drew."""

    def __init__(self) -> None:
        self._runs: dict[str, _Execution] = {}

    def _execution(self) -> _Execution | None:
        wid = DBOS.workflow_id
        if wid is None:
            return None
        run = self._runs.get(wid)
        if run is None:
            run = self._runs[wid] = _Execution()
        return run

    async def answer(self, key: StepKey, attempt: int) -> RecordedLimit | None:
        """What the workflow's checkpoints say the limit did to this attempt; ``None``: read the clock."""
        run = self._execution()
        if run is None:
            return None
        k = _key(key, attempt)
        run.began[k] = len(run.drawn.get(_task(), ()))
        if run.found is None:
            run.found, run.last_recorded = await _read(str(DBOS.workflow_id))
        queue = run.found.get(k)
        if not queue:  # the run went on past this attempt (its later steps are checkpointed), or read the clock
            return _NOT_ENDED if run.last_recorded > run.last_drawn else None
        step_id, recorded, drawn = queue.pop(0)
        run.passed.update((step_id, *drawn))
        return recorded

    def note(self, key: StepKey, attempt: int, when: LimitWhen, spent: Usage | None) -> LimitNote | None:
        """This execution's stop, to checkpoint (a cut: with the ids its attempt drew); ``None`` outside a workflow."""
        run = self._execution()
        if run is None:
            return None
        drawn: tuple[int, ...] = ()
        began = run.began.get(_key(key, attempt))
        if when == "during" and began is not None:
            drawn = tuple(run.drawn.get(_task(), [])[began:])
        return LimitNote(key, attempt, when, spent, drawn)

    def draw(self) -> StepReservation:
        """The next step id of this workflow, past the ids a replayed stop passes over (no await)."""
        run = self._execution()
        at = DBOS.reserve_step()
        if run is None:
            return at
        while at.step_id in run.passed:
            run.passed.discard(at.step_id)
            at = DBOS.reserve_step()
        if run.passed:  # drawn already (a judgement read when its failure was replayed)
            run.passed.difference_update([i for i in run.passed if i < at.step_id])
        run.drawn.setdefault(_task(), []).append(at.step_id)
        run.last_drawn = max(run.last_drawn, at.step_id)
        return at

    def forget(self) -> None:
        """Drop what this workflow's execution holds (its run ended)."""
        wid = DBOS.workflow_id
        if wid is not None:
            self._runs.pop(wid, None)


def _task() -> int:
    return anyio.get_current_task().id


def _parse(out: dict[str, Any]) -> tuple[_AttemptKey, RecordedLimit, tuple[int, ...]]:
    spent = Usage(**out["spent"]) if out.get("spent") is not None else None
    k = (out["session_id"], out["name"], out["index"], out["attempt"])
    return k, RecordedLimit(out["when"], spent), tuple(out.get("drawn", ()))


async def _read(wid: str) -> tuple[dict[_AttemptKey, list[_Found]], int]:
    """The workflow's ``.limit`` checkpoints, by attempt, in order, and its last step id (one read of names)."""

    def names() -> list[Any]:
        return DBOS.list_workflow_steps(wid, load_output=False)

    def output(row: int) -> Any:
        return DBOS.list_workflow_steps(wid, load_output=True, offset=row, limit=1)[0]["output"]

    found: dict[_AttemptKey, list[_Found]] = {}
    steps = await _outside_workflow(names)
    for row, step in enumerate(steps):
        if str(step["function_name"]).endswith(LIMIT_STEP):
            k, recorded, drawn = _parse(await _outside_workflow(functools.partial(output, row)))
            found.setdefault(k, []).append((int(step["function_id"]), recorded, drawn))
    return found, max((int(step["function_id"]) for step in steps), default=0)


async def _outside_workflow(fn: Any) -> Any:
    """``fn()`` in a worker thread, in an empty context: DBOS does not make its reads a step of the workflow."""
    return await anyio.to_thread.run_sync(contextvars.Context().run, fn)
