"""A cut run's spend is in the journal: its ``run.end`` ``cut`` says it, and so does a session read.

A served run the server cut (its client left, a shutdown) was logged with what it had spent
(``run cut``), but the journal kept no figure: ``run.end`` had no usage, so a later reader
(``GET /v1/sessions/{id}``, another process) could not tell it. The cut end now records it
(the run's requests and the one the cut left unanswered, as the log line counts them), and a
session read's turns say what each spent (``usage``: a completed run's result, a failed run's
``run.failed``, a cut run's end).
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import anyio
import pytest

from jeeves_router.journal import JournalRuntime, MemoryJournal, SQLiteJournal, session_turns
from jeeves_router.journal.records import Entry, RunEndRecord, RunStartRecord
from jeeves_router.serve import create_app
from jeeves_router.testing import CUT_USAGE, DEFAULT_USAGE, FunctionModel
from jeeves_router.usage import spent_usage
from tests.serve_apps import desk_with
from tests.test_serve_client_gone_usage import GUARD_S, Cuts, FirstThenWaits, cuts, leave_mid_answer  # noqa: F401  (fixture)
from tests.test_serve_failed_before_text import FAILED, fails_at_once

MESSAGES: Any = [{"role": "user", "content": "refund my order"}]
LOGGED = ("input_tokens", "output_tokens", "requests", "cost_usd")


def test_a_served_run_cut_when_its_client_left_has_its_spend_journaled_as_the_log_line_says(
    tmp_path: Path,
    cuts: Cuts,  # noqa: F811
) -> None:
    model = FirstThenWaits()
    _, [turn] = leave_mid_answer(create_app(desk_with(model), journal=tmp_path / "runs.db"), model, cuts, "gone")
    [record] = cuts.records
    logged = {k: getattr(record, k) for k in LOGGED}
    assert logged == {k: getattr(DEFAULT_USAGE + CUT_USAGE, k) for k in LOGGED}  # the cut-off request counts
    assert turn["status"] == "cut"
    assert {k: turn["usage"][k] for k in LOGGED} == logged  # the session read had no usage

    async def ends() -> list[dict[str, Any] | None]:
        async with SQLiteJournal(tmp_path / "runs.db") as journal:
            entries = await journal.read("gone", types=("run.end",))
        return [e.record.usage for e in entries if isinstance(e.record, RunEndRecord)]

    assert anyio.run(ends) == [asdict(DEFAULT_USAGE + CUT_USAGE)]


@pytest.mark.anyio
async def test_a_session_read_says_what_each_turn_spent() -> None:
    journal = MemoryJournal()
    answers = desk_with(FunctionModel(lambda r: "Refunded."))
    answers.runtime = JournalRuntime(journal)
    done = await answers.run("refund my order", session_id="s")
    fails = desk_with(FunctionModel(fails_at_once))
    fails.runtime = JournalRuntime(journal)
    with pytest.raises(ConnectionResetError) as info:
        await fails.run("refund my order", session_id="s")
    older = [  # a cut recorded by an earlier release: no usage
        Entry(session_id="s", run_id="r-old", record=RunStartRecord(agent="desk", prompt="hi", input_digest="d")),
        Entry(session_id="s", run_id="r-old", record=RunEndRecord(attempt=1, status="cut")),
    ]
    await journal.append(older)
    assert spent_usage(info.value) == DEFAULT_USAGE + FAILED
    turns = await session_turns(journal, "s")
    assert [(t.status, t.usage) for t in turns] == [
        ("ok", done.usage),
        ("failed", spent_usage(info.value)),
        ("cut", None),
    ]
