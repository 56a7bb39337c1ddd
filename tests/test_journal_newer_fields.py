"""A journal written by a newer release, which added fields, is read by this one (a rolling upgrade).

Servers sharing one journal (a SQLite file, PostgreSQL) are upgraded one at a time: for a
while an older reader reads what a newer writer wrote. Entries and records were decoded with
``extra="forbid"``, so a field a newer release adds (the ``usage`` of a cut run's ``run.end``,
say) made every entry that had it unreadable (``JournalCorrupt``). A reader now ignores fields it
does not know, in the entry and in its record; on every journal the tests run (memory: the
only decoding it does is ``Entry.from_body``, so its newer entries come through it).
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from jeeves_router import Agent, tool
from jeeves_router.journal import (
    Journal,
    JournalRuntime,
    MemoryJournal,
    recorded_events,
    session_turns,
)
from jeeves_router.journal.records import Entry, RunEndRecord
from jeeves_router.testing import Call, Reply, ScriptedModel
from tests.test_journal_surrogates import journals  # noqa: F401  (fixture: memory, SQLite, PostgreSQL)


@tool
def lookup(invoice: str) -> str:
    """Look an invoice up."""
    return f"{invoice}: paid"


def desk(journal: Journal, model: ScriptedModel) -> Agent:
    return Agent("Desk.", name="desk", model=model, tools=[lookup], runtime=JournalRuntime(journal))


_BODY = Entry.body  # this release's writer


def newer_body(entry: Entry) -> str:
    """``entry`` as a newer release writes it: a field this release lacks in the entry and in its record."""
    data = json.loads(_BODY(entry))
    data["shard"] = "eu-1"
    data["record"]["written_by"] = "jeeves-router 9.9"
    return json.dumps(data, separators=(",", ":"))


@pytest.mark.anyio
async def test_entries_a_newer_release_wrote_with_more_fields_are_read(
    journals: Callable[[], Journal],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source = MemoryJournal()  # the run as recorded; then stored as the newer release writes it
    model = ScriptedModel([Reply(calls=[Call("lookup", {"invoice": "INV-7"})]), "INV-7 is paid."])
    result = await desk(source, model).run("is INV-7 paid?", session_id="s")
    entries = await source.read("s")
    assert {e.record.type for e in entries} >= {"run.start", "tool.started", "step", "model", "event", "run.end"}

    writer = journals()
    if isinstance(writer, MemoryJournal):  # it keeps objects: a newer entry reaches it only decoded
        await writer.append([Entry.from_body(newer_body(e)) for e in entries])
    else:
        with monkeypatch.context() as patched:
            patched.setattr(Entry, "body", newer_body)
            await writer.append(entries)
        await writer.aclose()

    reader = journals()
    try:
        read = await reader.read("s")  # raised JournalCorrupt ("Extra inputs are not permitted")
        assert [e.record for e in read] == [e.record for e in entries]
        [turn] = await session_turns(reader, "s")
        assert (turn.status, turn.output, turn.usage) == ("ok", result.output, result.usage)
        assert await recorded_events(reader, "s") == await recorded_events(source, "s")
        silent = ScriptedModel([])  # any call raises: the answer must come from the journal
        replayed = await desk(reader, silent).resume("s")
        assert replayed.output == result.output and silent.requests == []
    finally:
        await reader.aclose()


def test_an_end_without_usage_is_written_as_before() -> None:
    """An end with no ``usage`` (every completed or failed run's) is written without the field: any release reads it."""
    end = Entry(session_id="s", run_id="r", ts=1.0, record=RunEndRecord(attempt=1, status="completed"))
    assert json.loads(end.body())["record"] == {
        "type": "run.end",
        "attempt": 1,
        "status": "completed",
        "error_type": None,
        "message": None,
    }
    cut = RunEndRecord(attempt=1, status="cut", usage={"input_tokens": 3, "requests": 1})
    assert Entry.from_body(Entry(session_id="s", run_id="r", record=cut).body()).record == cut
