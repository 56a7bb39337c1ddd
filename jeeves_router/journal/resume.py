"""Which recorded run :meth:`Agent.resume` runs again, and the input it was started with.

A session's journal holds one ``run.start`` entry per attempt of each run and a ``run.end``
entry when an attempt ends. Resume picks the run it is told, else the last run that never
completed, else the last run (a completed run is replayed from the journal, with no model
call); the input comes from the run's first ``run.start``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter

from ..errors import UsageError
from ..messages import Message
from .base import Journal
from .records import RunEndRecord, RunStartRecord

__all__ = ["RecordedRuns", "ResumePoint", "find_resume_point", "read_runs"]

_HISTORY = TypeAdapter(tuple[Message, ...])


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
        attempts: How many times each run was started.
        completed: Each completed run's last completed attempt.
    """

    first: dict[str, RunStartRecord]
    attempts: dict[str, int]
    completed: dict[str, int]


async def read_runs(journal: Journal, session_id: str) -> RecordedRuns:
    """The recorded runs of ``session_id`` (one read of its ``run.start`` and ``run.end`` entries)."""
    runs = RecordedRuns({}, {}, {})
    for e in await journal.read(session_id, types=("run.start", "run.end")):
        if isinstance(e.record, RunStartRecord):
            runs.first.setdefault(e.run_id, e.record)
            runs.attempts[e.run_id] = runs.attempts.get(e.run_id, 0) + 1
        elif isinstance(e.record, RunEndRecord) and e.record.status == "completed":
            runs.completed[e.run_id] = e.record.attempt
    return runs


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
