"""What :class:`~jeeves_router.journal.JournalRuntime` keeps per run: recorded steps by key, and run state."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..usage import NO_USAGE, Usage
from .failures import PendingFailure, RecordedFailures
from .records import Entry, ModelRecord, Record, StepFailedRecord, StepRecord, ToolStartedRecord

__all__ = ["RunState", "StepIndex"]


@dataclass(slots=True)
class StepIndex:
    """The recorded steps of one (session, run), by position and digest."""

    done: dict[tuple[int, str], StepRecord | ModelRecord] = field(default_factory=dict)
    by_pos: dict[int, list[str]] = field(default_factory=dict)
    started: dict[tuple[int, str], ToolStartedRecord] = field(default_factory=dict)
    failed_claims: set[str] = field(default_factory=set)  # tool calls whose outcome is known: they raised
    failed: RecordedFailures = field(default_factory=RecordedFailures)
    paid: set[tuple[int, str]] = field(default_factory=set)  # model and tool calls this execution already counted
    cut: dict[tuple[int, str], Usage] = field(default_factory=dict)  # what earlier attempts' cuts left waiting (.cuts)
    failures_counted: set[tuple[int, str]] = field(default_factory=set)  # served results whose failures counted

    def add(self, rec: Record) -> None:
        """Index one record read from the journal or just written."""
        if isinstance(rec, (StepRecord, ModelRecord)):
            self.done[(rec.index, rec.digest)] = rec
            self.by_pos.setdefault(rec.index, []).append(rec.digest)
        elif isinstance(rec, ToolStartedRecord):
            self.started[(rec.index, rec.digest)] = rec
        elif isinstance(rec, StepFailedRecord) and rec.cut:  # not a failure: a request a cut left waiting
            if rec.spent_usage is not None:
                k = (rec.index, rec.digest)
                self.cut[k] = self.cut.get(k, Usage()) + Usage(**rec.spent_usage)
        elif isinstance(rec, StepFailedRecord):
            self.failed.add(rec)
            if rec.claim is not None:
                self.failed_claims.add(rec.claim)

    def failed_before(self, k: tuple[int, str], attempt: int | None) -> Usage | None:
        """What the failed attempts before step ``k``'s recorded result spent, for serving it again (see :mod:`.cuts`).

        The failures the attempt that recorded the result (``attempt``) went through at that
        step: that attempt counted them as they failed, and the result holds only its own
        request. Once per execution; nothing when this replay raises the step's failures
        again (a completed run's: the ladder counts them), and nothing for a result recorded
        by an earlier release (no ``attempt``) or a failure that spent nothing.
        """
        if attempt is None or k in self.failures_counted:
            return None
        self.failures_counted.add(k)
        failures = self.failed.by_step.get(k, ())
        replayed = self.failed.attempt
        if replayed is not None and any(f.attempt == replayed for f in failures):
            return None
        spent = [Usage(**f.spent_usage) for f in failures if f.attempt == attempt and f.spent_usage is not None]
        return sum(spent, NO_USAGE) if spent else None


@dataclass(slots=True)
class RunState:
    """One journaled root run this process executes: its ids, attempt and entries waiting to be written."""

    session_id: str
    run_id: str
    attempt: int
    fresh: bool
    pending: list[Entry | PendingFailure] = field(default_factory=list)  # written with the next entry
    cuts: list[Entry] = field(default_factory=list)  # the requests cut steps left waiting: written if the run is cut
    completed_attempt: int | None = None  # resuming a completed run: the attempt whose failures replay
    strict: bool = False  # a step that differs from its record raises (a keyed retry of a completed run)
