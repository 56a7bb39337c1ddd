"""Which recorded run :meth:`Agent.resume` runs again, and the input it was started with.

A session's journal holds one ``run.start`` entry per attempt of each run and a ``run.end``
entry when an attempt ends. Resume picks the run it is told, else the last run that never
completed, else the last run (a completed run is replayed from the journal, with no model
call); the input comes from the run's first ``run.start``.

Two processes may resume the same run at the same moment: both read the same last attempt
and write a ``run.start`` for the same next one. Each ``run.start`` of a resume carries a
claim; after writing it the process reads the run back, and the first ``run.start`` of that
(run, attempt) in journal order wins the attempt (:func:`claim_attempt`). The loser takes
the next attempt and claims again, so the two executions are recorded under two attempts,
as when one resume starts a moment after the other; their tool calls are then shared out by
``tool.started`` claims (:mod:`.idempotency`).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter

from ..errors import RunError, UsageError
from ..messages import Message
from .base import Journal
from .records import Entry, RunEndRecord, RunStartRecord, digest, jsonable_mapping, to_json

if TYPE_CHECKING:
    from ..architectures.base import RunContext

__all__ = [
    "RecordedRuns",
    "ResumeConflict",
    "ResumePoint",
    "claim_attempt",
    "find_resume_point",
    "newer_run_started",
    "read_runs",
    "start_record",
]

_HISTORY = TypeAdapter(tuple[Message, ...])

#: How many attempt numbers a resume tries to claim before giving up (each loss means
#: another process started the same run in between).
CLAIM_TRIES = 8


class ResumeConflict(RunError):
    """Other processes kept resuming the same run while this one tried to claim an attempt.

    Raised by :meth:`Agent.resume` before any model or tool is called; ``metadata`` holds
    the session and run ids. The run is left as it was: resume it again later.
    """


@dataclass(frozen=True, slots=True)
class ResumePoint:
    """What :meth:`Agent.resume` needs to run a recorded run again."""

    run_id: str
    agent: str
    prompt: str
    history: tuple[Message, ...]
    context: Mapping[str, Any]
    force_route: str | None
    options: Mapping[str, Any]
    completed: bool


@dataclass(slots=True)
class RecordedRuns:
    """The runs of one session as its ``run.start`` / ``run.end`` entries tell them, in order of first start.

    Attributes:
        first: Each run's first ``run.start`` record (its input).
        attempts: Each run's highest attempt number started.
        completed: Each completed run's last completed attempt.
        claims: The claim of the first ``run.start`` of each (run, attempt): the winner's.
    """

    first: dict[str, RunStartRecord]
    attempts: dict[str, int]
    completed: dict[str, int]
    claims: dict[tuple[str, int], str]

    @classmethod
    def of(cls, entries: Iterable[Entry]) -> RecordedRuns:
        """The runs told by the ``run.start`` and ``run.end`` entries among ``entries`` (others are skipped)."""
        runs = cls({}, {}, {}, {})
        for e in entries:
            if isinstance(e.record, RunStartRecord):
                runs.first.setdefault(e.run_id, e.record)
                runs.attempts[e.run_id] = max(runs.attempts.get(e.run_id, 0), e.record.attempt)
                runs.claims.setdefault((e.run_id, e.record.attempt), e.record.claim)
            elif isinstance(e.record, RunEndRecord) and e.record.status == "completed":
                runs.completed[e.run_id] = e.record.attempt
        return runs

    def telling(self, run_id: str) -> int | None:
        """The attempt that tells how run ``run_id`` went: its last completed one, else its latest one.

        Two executions of one run at once (two resumes) are two attempts, and one can fail
        after the other completed (it may not repeat a tool call the other made): the run
        completed. Resume replays a completed run's last completed attempt; the readers of a
        session (``jeeves-router replay`` and ``trace``, the session turns) show that attempt
        too. ``None`` if the run has no ``run.start`` here.
        """
        return self.completed.get(run_id, self.attempts.get(run_id))


def start_record(ctx: RunContext) -> RunStartRecord:
    """The ``run.start`` record of the run ``ctx`` describes: its input, and the input's digest."""
    start = RunStartRecord(
        agent=ctx.agent.name,
        prompt=ctx.prompt,
        history=to_json(ctx.history),
        context=jsonable_mapping(ctx.context, what="context"),
        force_route=ctx.force_route,
        options=jsonable_mapping(ctx.options, what="options"),
        input_digest="",
    )
    input_digest = digest(
        {
            "agent": start.agent,
            "prompt": start.prompt,
            "history": ctx.history,
            "context": start.context,
            "force_route": start.force_route,
            "options": start.options,
        }
    )
    return start.model_copy(update={"input_digest": input_digest})


async def read_runs(journal: Journal, session_id: str, run_id: str | None = None) -> RecordedRuns:
    """The recorded runs of ``session_id`` (one read of its ``run.start`` and ``run.end`` entries).

    Args:
        journal: The journal to read.
        session_id: The session.
        run_id: Read only this run's entries (``None``: every run of the session).
    """
    return RecordedRuns.of(await journal.read(session_id, run_id=run_id, types=("run.start", "run.end")))


async def newer_run_started(journal: Journal, session_id: str, run_id: str) -> bool:
    """Whether a run of ``session_id`` first started after run ``run_id`` did (the turn is not the newest)."""
    order = list((await read_runs(journal, session_id)).first)
    return run_id in order and order[-1] != run_id


async def claim_attempt(
    journal: Journal, session_id: str, run_id: str, start: RunStartRecord
) -> tuple[int, int | None]:
    """Write ``start`` as the next attempt of recorded run ``run_id``, won against concurrent resumes.

    Each try writes ``start`` with the attempt after the highest one read and a new claim,
    then reads the run back: the first ``run.start`` of that attempt in journal order wins.
    A loser (another process resumed the run between this read and this write) tries the
    next attempt; a lost ``run.start`` stays in the journal and is ignored by readers.

    Returns:
        The attempt won, and the run's last completed attempt as read after winning
        (``None``: the run never completed).

    Raises:
        UsageError: if the session has no recorded run ``run_id``.
        ResumeConflict: if :data:`CLAIM_TRIES` tries in a row were lost.
    """
    runs = await read_runs(journal, session_id, run_id)
    if run_id not in runs.first:
        raise UsageError(f"session {session_id!r} has no recorded run {run_id!r} in {journal!r}")
    for _ in range(CLAIM_TRIES):
        attempt, claim = runs.attempts[run_id] + 1, uuid.uuid4().hex
        rec = start.model_copy(update={"attempt": attempt, "claim": claim})
        await journal.append([Entry(session_id=session_id, run_id=run_id, record=rec)])
        runs = await read_runs(journal, session_id, run_id)
        if runs.claims.get((run_id, attempt)) == claim:
            return attempt, runs.completed.get(run_id)
    raise ResumeConflict(
        f"run {run_id!r} of session {session_id!r} could not be resumed: another process is resuming it "
        f"(lost the claim of {CLAIM_TRIES} attempts in a row); nothing was run, resume it again later",
        metadata={"session_id": session_id, "run_id": run_id},
    )


async def find_resume_point(journal: Journal, agent: str, session_id: str, run_id: str | None = None) -> ResumePoint:
    """The recorded run of ``session_id`` to resume: ``run_id``, else the last unfinished one, else the last one.

    Args:
        journal: The journal the session was recorded in.
        agent: The name of the agent that resumes; the run must have been recorded for it.
        session_id: The session to resume.
        run_id: A recorded run of the session, or ``None`` to pick one as above.

    Raises:
        UsageError: if the session has no recorded run (or none called ``run_id``), or
            it was recorded for another agent.
    """
    runs = await read_runs(journal, session_id)
    first, completed = runs.first, runs.completed
    if not first:
        raise UsageError(f"session {session_id!r} has no recorded run in {journal!r}; nothing to resume")
    if run_id is not None and run_id not in first:
        raise UsageError(f"session {session_id!r} has no recorded run {run_id!r}; recorded: {', '.join(first)}")
    if run_id is None:
        unfinished = [rid for rid in first if rid not in completed]
        run_id = unfinished[-1] if unfinished else list(first)[-1]
    rec = first[run_id]
    if rec.agent != agent:
        raise UsageError(
            f"session {session_id!r} was recorded for agent {rec.agent!r}; resume it with that agent, not {agent!r}"
        )
    return ResumePoint(
        run_id=run_id,
        agent=rec.agent,
        prompt=rec.prompt,
        history=_HISTORY.validate_python(rec.history),
        context=rec.context,
        force_route=rec.force_route,
        options=rec.options,
        completed=run_id in completed,
    )
