"""Durable runs: record every step of a run, replay it without calling a model, resume it.

>>> from jeeves_router.journal import JournalRuntime, SQLiteJournal
>>> runtime = JournalRuntime(SQLiteJournal("runs.db"))
>>> desk = Agent("Support desk", model=..., architecture=Router(...), runtime=runtime)
>>> await desk.run("I was charged twice", session_id="s-42")   # recorded
>>> await desk.resume("s-42")                                   # after a crash

Each name is imported from its module on first use: a command or an application that does
not touch the journal never loads it (nor pydantic, which the records use).
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .base import Journal
    from .idempotency import current_idempotency_key
    from .memory import MemoryJournal
    from .postgres import PostgresJournal
    from .records import (
        SCHEMA_VERSION,
        Entry,
        JournalCorrupt,
        JournalError,
        ToolOutcomeUnknown,
        register_step_type,
    )
    from .replay import format_event, recorded_events
    from .runtime import JournalRuntime, ResumePoint, UnknownToolPolicy
    from .sessions import SessionHistory, Turn, session_turns
    from .sqlite import SQLiteJournal

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        ".base": ("Journal",),
        ".idempotency": ("current_idempotency_key",),
        ".memory": ("MemoryJournal",),
        ".postgres": ("PostgresJournal",),
        ".records": (
            "SCHEMA_VERSION",
            "Entry",
            "JournalCorrupt",
            "JournalError",
            "ToolOutcomeUnknown",
            "register_step_type",
        ),
        ".replay": ("format_event", "recorded_events"),
        ".runtime": ("JournalRuntime", "ResumePoint", "UnknownToolPolicy"),
        ".sessions": ("SessionHistory", "Turn", "session_turns"),
        ".sqlite": ("SQLiteJournal",),
    },
)

__all__ = [
    "SCHEMA_VERSION",
    "Entry",
    "Journal",
    "JournalCorrupt",
    "JournalError",
    "JournalRuntime",
    "MemoryJournal",
    "PostgresJournal",
    "ResumePoint",
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
