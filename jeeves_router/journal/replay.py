"""Read a session's recorded event stream back (for ``jeeves-router replay``)."""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import ValidationError

from ..events import Event, RunCompleted, RunFailed, RunStarted, TextDelta, event_adapter
from .base import Journal
from .records import EventRecord, JournalCorrupt, json_text
from .resume import RecordedRuns

__all__ = ["recorded_events", "format_event"]


async def recorded_events(journal: Journal, session_id: str) -> list[Event]:
    """The events of every run of ``session_id``, in run order, from the attempt that tells how each went.

    A run that was replayed or resumed was recorded once per attempt; its last completed
    attempt, else its latest one, tells how the run went (:meth:`.resume.RecordedRuns.telling`).

    Raises:
        JournalCorrupt: if an entry cannot be read back as an event.
    """
    entries = await journal.read(session_id, types=("run.start", "run.end", "event"))
    runs = RecordedRuns.of(entries)
    by_run: dict[str, list[Event]] = {rid: [] for rid in runs.first}  # in order of first start
    adapter = event_adapter()
    for e in entries:
        rec = e.record
        if isinstance(rec, EventRecord) and rec.attempt == runs.telling(e.run_id):
            try:
                by_run[e.run_id].append(adapter.validate_python(rec.event))
            except ValidationError as exc:
                raise JournalCorrupt(
                    f"{journal!r}: entry {e.seq} (session {session_id!r}) is not a valid event: "
                    f"{exc.errors()[0]['msg']}"
                ) from exc
    return [ev for events in by_run.values() for ev in events]


def format_event(ev: Event) -> str:
    """One readable line for ``ev``: its kind, its route path, then its fields."""
    head = f"{ev.kind:<20} {'/'.join(ev.path)}"
    if isinstance(ev, TextDelta):
        return f"{head}  {ev.text!r}"
    if isinstance(ev, RunStarted):
        return f"{head}  prompt={ev.prompt!r}"
    if isinstance(ev, RunCompleted):
        return f"{head}  status={ev.result.status} route={ev.result.route} output={ev.result.output!r}"
    if isinstance(ev, RunFailed):
        return f"{head}  {ev.error_type}: {ev.message}"
    data = event_adapter().dump_python(ev, mode="json")
    for k in ("kind", "session_id", "path", "ts"):
        data.pop(k, None)
    return f"{head}  {json_text(data, sort_keys=True)}"


def format_events(events: Iterable[Event]) -> list[str]:
    """:func:`format_event` for each event."""
    return [format_event(ev) for ev in events]
