"""Durable runs: record every step of a run, replay it without calling a model, resume it.

Each name is imported from its module on first use: a command or an application that does
not touch the journal never loads it (nor pydantic, which the records use).

Example:
    A run recorded in ``runs.db``; then, as after a crash, a new process opens the file and
    resumes the session: the answer comes back from the journal and no model is called (the
    restarted agent's scripted model has no reply to give):

    >>> import anyio
    >>> from jeeves_router import Agent
    >>> from jeeves_router.journal import JournalRuntime, SQLiteJournal
    >>> from jeeves_router.testing import ScriptedModel
    >>> journal = SQLiteJournal("runs.db")
    >>> billing = Agent("You resolve payments.", name="billing", model=ScriptedModel(["Refund issued."]),
    ...                 runtime=JournalRuntime(journal))
    >>> billing.run_sync("I was charged twice", session_id="s-42").output  # recorded
    'Refund issued.'
    >>> anyio.run(journal.aclose)
    >>> reopened = SQLiteJournal("runs.db")
    >>> restarted = Agent("You resolve payments.", name="billing", model=ScriptedModel([]),
    ...                   runtime=JournalRuntime(reopened))
    >>> anyio.run(restarted.resume, "s-42").output  # replayed from the journal
    'Refund issued.'
    >>> anyio.run(reopened.aclose)
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .base import Journal
    from .failures import ReplayedError
    from .idempotency import current_idempotency_key
    from .keyed import IdempotencyConflict, RunInFlight
    from .memory import MemoryJournal
    from .postgres import PostgresJournal
    from .records import (
        SCHEMA_VERSION,
        Entry,
        JournalCorrupt,
        JournalError,
        ToolOutcomeUnknown,
    )
    from .replay import format_event, recorded_events
    from .resume import ResumeConflict, ResumePoint
    from .runtime import JournalRuntime, UnknownToolPolicy
    from .sessions import SessionHistory, Turn, session_turns
    from .sqlite import SQLiteJournal
    from .step_results import register_step_type

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        ".base": ("Journal",),
        ".failures": ("ReplayedError",),
        ".idempotency": ("current_idempotency_key",),
        ".keyed": ("IdempotencyConflict", "RunInFlight"),
        ".memory": ("MemoryJournal",),
        ".postgres": ("PostgresJournal",),
        ".records": (
            "SCHEMA_VERSION",
            "Entry",
            "JournalCorrupt",
            "JournalError",
            "ToolOutcomeUnknown",
        ),
        ".step_results": ("register_step_type",),
        ".replay": ("format_event", "recorded_events"),
        ".resume": ("ResumeConflict", "ResumePoint"),
        ".runtime": ("JournalRuntime", "UnknownToolPolicy"),
        ".sessions": ("SessionHistory", "Turn", "session_turns"),
        ".sqlite": ("SQLiteJournal",),
    },
)

__all__ = [
    "SCHEMA_VERSION",
    "Entry",
    "IdempotencyConflict",
    "Journal",
    "JournalCorrupt",
    "JournalError",
    "JournalRuntime",
    "MemoryJournal",
    "PostgresJournal",
    "ReplayedError",
    "ResumeConflict",
    "ResumePoint",
    "RunInFlight",
    "SQLiteJournal",
    "SessionHistory",
    "ToolOutcomeUnknown",
    "Turn",
    "UnknownToolPolicy",
    "current_idempotency_key",
    "format_event",
    "recorded_events",
    "register_step_type",
    "session_turns",
]
