"""What :class:`~jeeves_router.journal.JournalRuntime` keeps per run: recorded steps by key, and run state."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..usage import Usage
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
