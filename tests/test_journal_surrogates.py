"""Text with an unpaired UTF-16 surrogate (an emoji cut in half by a JavaScript client) in a journal.

Python strings can hold ``"\\ud83d"``; UTF-8 cannot. A journaled run with such a prompt or
reply used to fail before it started (``UnicodeEncodeError`` from the request's digest) or
when its entries were written (pydantic's JSON writer). Now such an entry is written with
ASCII escapes and reads back as the same text, on every journal; text without one is written
exactly as before (so digests of recorded runs do not change).

A prompt with one no longer reaches a journal as it is: ``Agent.run`` replaces the unpaired
half with U+FFFD (``jeeves_router._text``); a model's reply, a tool's result, a context value
or an older journal's prompt still may hold one.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import anyio
import pytest

from jeeves_router import Agent
from jeeves_router.journal import Journal, JournalRuntime, MemoryJournal, PostgresJournal, SQLiteJournal
from jeeves_router.journal.records import Entry, RunStartRecord, digest
from jeeves_router.testing import ScriptedModel

PROMPT = "refund for \ud83d the order"  # the low half of the emoji was cut off
RUN_PROMPT = "refund for \ufffd the order"  # what Agent.run makes of it
REPLY = "noted \udc00 here"


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def journals(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], Journal]]:
    """Journals on one store: a second one reads what the first wrote (memory: the same object)."""
    if request.param == "memory":
        memory = MemoryJournal()
        yield lambda: memory
    elif request.param == "sqlite":
        yield lambda: SQLiteJournal(tmp_path / "j.db")
    else:
        url: str = request.getfixturevalue("pg_url")
        table = f"jeeves_test_{uuid.uuid4().hex[:12]}"
        yield lambda: PostgresJournal(url, table=table)

        async def drop() -> None:
            async with PostgresJournal(url, table=table) as j:
                await j._query(f"DROP TABLE IF EXISTS {table}", [])

        anyio.run(drop)


@pytest.mark.anyio
async def test_a_run_with_a_lone_surrogate_is_journaled_and_resumed_as_the_same_text(
    journals: Callable[[], Journal],
) -> None:
    writer, reader = journals(), journals()
    try:
        live = ScriptedModel([REPLY], name="desk")
        desk = Agent("Desk.", name="desk", model=live, runtime=JournalRuntime(writer))
        result = await desk.run(PROMPT, session_id="s")
        assert (result.status, result.output) == ("ok", REPLY)
        assert live.requests[0].messages[-1].text == RUN_PROMPT

        silent = ScriptedModel([], name="desk")  # any call raises: the reply must come from the journal
        resumed = await Agent("Desk.", name="desk", model=silent, runtime=JournalRuntime(reader)).resume("s")
        assert resumed.output == REPLY and silent.requests == []
        starts = [e.record for e in await reader.read("s") if isinstance(e.record, RunStartRecord)]
        assert starts and starts[0].prompt == RUN_PROMPT
    finally:
        await writer.aclose()
        await reader.aclose()


def test_text_without_a_lone_surrogate_is_written_and_digested_as_before() -> None:
    entry = Entry(
        session_id="s", run_id="r", ts=1.0, record=RunStartRecord(prompt="café 😀", agent="desk", input_digest="d")
    )
    assert "café 😀" in entry.body()  # pydantic's own writer: raw UTF-8, not escapes
    assert Entry.from_body(entry.body()) == entry
    expected = hashlib.sha256(json.dumps({"p": "café 😀"}, ensure_ascii=False, separators=(",", ":")).encode())
    assert digest({"p": "café 😀"}) == expected.hexdigest()

    cut = Entry(
        session_id="s", run_id="r", ts=1.0, record=RunStartRecord(prompt=PROMPT, agent="desk", input_digest="d")
    )
    assert "\\ud83d" in cut.body() and Entry.from_body(cut.body()) == cut


def test_replay_and_trace_show_such_a_session_without_failing(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    async def record() -> None:
        journal = SQLiteJournal(tmp_path / "j.db")
        desk = Agent("Desk.", name="desk", model=ScriptedModel([REPLY]), runtime=JournalRuntime(journal))
        await desk.run(PROMPT, session_id="s")
        await journal.aclose()

    anyio.run(record)
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root), "PYTHONIOENCODING": "utf-8"}
    command = [sys.executable, "-m", "jeeves_router.cli"]
    for args in (
        ["replay", str(tmp_path / "j.db"), "--session", "s"],
        ["replay", str(tmp_path / "j.db"), "-s", "s", "--json"],
    ):
        out = subprocess.run([*command, *args], env=env, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert "\\udc00" in out.stdout  # the cut half, escaped, not a UnicodeEncodeError
    page = tmp_path / "trace.html"
    out = subprocess.run(
        [*command, "trace", str(tmp_path / "j.db"), "--session", "s", "-o", str(page)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "\\udc00" in page.read_text(encoding="utf-8")  # the reply's cut half
