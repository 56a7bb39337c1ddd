"""Record a routed run, replay it without calling a model, and diverge on purpose."""

from __future__ import annotations

from pathlib import Path

import pytest

from jeeves_router.errors import ReplayDivergence, UsageError
from jeeves_router.journal import JournalRuntime, MemoryJournal, SQLiteJournal, recorded_events
from jeeves_router.testing import ScriptedModel, capture_events
from tests.journal_helpers import PROMPT, DeskModel, build_desk, strip_ts


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["memory", "sqlite"])
def journal_factory(request: pytest.FixtureRequest, tmp_path: Path):  # type: ignore[no-untyped-def]
    memory = MemoryJournal()

    def make():  # type: ignore[no-untyped-def]
        return memory if request.param == "memory" else SQLiteJournal(tmp_path / "j.db")

    return make


async def run_ids(journal, session_id: str) -> list[str]:  # type: ignore[no-untyped-def]
    return list(dict.fromkeys(e.run_id for e in await journal.read(session_id, types=("run.start",))))


@pytest.mark.anyio
async def test_resume_replays_a_completed_run_without_a_model_and_records_the_same_events(journal_factory) -> None:  # type: ignore[no-untyped-def]
    live = DeskModel()
    first = await capture_events(build_desk(JournalRuntime(journal_factory()), live), PROMPT, session_id="s1")
    assert live.calls == ["classify:INV-7", "INV-7:1", "INV-7:2"]

    silent = ScriptedModel([], name="desk")  # any call raises ScriptExhausted
    journal = journal_factory()
    result = await build_desk(JournalRuntime(journal), silent).resume("s1")
    assert silent.requests == []
    assert result.output == "Refund issued: INV-7 was paid twice."
    assert strip_ts(await recorded_events(journal, "s1")) == strip_ts(first)


@pytest.mark.anyio
async def test_resume_serves_each_turn_of_a_multi_turn_session(journal_factory) -> None:  # type: ignore[no-untyped-def]
    live = DeskModel()
    desk = build_desk(JournalRuntime(journal_factory()), live)
    r1 = await desk.run(PROMPT, session_id="s2")
    r2 = await desk.run("hello there", session_id="s2", history=r1.messages)
    assert r2.route == "general"

    silent = ScriptedModel([], name="desk")
    journal = journal_factory()
    replay = build_desk(JournalRuntime(journal), silent)
    first, second = await run_ids(journal, "s2")
    assert (await replay.resume("s2", run_id=first)).output == r1.output
    assert (await replay.resume("s2", run_id=second)).output == r2.output
    assert (await replay.resume("s2")).output == r2.output  # default: the last run
    assert silent.requests == []
    with pytest.raises(UsageError, match="no recorded run 'nope'"):
        await replay.resume("s2", run_id="nope")


@pytest.mark.anyio
async def test_run_with_a_recorded_prompt_is_a_new_live_run(journal_factory) -> None:  # type: ignore[no-untyped-def]
    await build_desk(JournalRuntime(journal_factory()), DeskModel()).run(PROMPT, session_id="s3")
    again = DeskModel()
    journal = journal_factory()
    result = await build_desk(JournalRuntime(journal), again).run(PROMPT, session_id="s3")
    assert again.calls == ["classify:INV-7", "INV-7:1", "INV-7:2"]
    assert result.output == "Refund issued: INV-7 was paid twice."
    assert len(await run_ids(journal, "s3")) == 2


@pytest.mark.anyio
async def test_strict_resume_raises_when_a_step_input_changed() -> None:
    journal = MemoryJournal()
    await build_desk(JournalRuntime(journal), DeskModel()).run(PROMPT, session_id="s5")
    changed = build_desk(JournalRuntime(journal, strict=True), ScriptedModel([], name="desk"))
    changed.architecture.route("billing").agent.instructions = "You resolve payments politely."  # type: ignore[attr-defined]
    with pytest.raises(ReplayDivergence, match="step"):
        await changed.resume("s5")
    # not strict: the changed step is called live, the classification still replays
    live = DeskModel()
    lenient = build_desk(JournalRuntime(journal), live)
    lenient.architecture.route("billing").agent.instructions = "You resolve payments politely."  # type: ignore[attr-defined]
    assert (await lenient.resume("s5")).output == "Refund issued: INV-7 was paid twice."
    assert live.calls == ["INV-7:1", "INV-7:2"]


@pytest.mark.anyio
async def test_recorded_events_are_the_latest_attempt_of_each_run(tmp_path: Path) -> None:
    journal = SQLiteJournal(tmp_path / "j.db")
    runtime = JournalRuntime(journal)
    events = await capture_events(build_desk(runtime, DeskModel()), PROMPT, session_id="s6")
    await build_desk(JournalRuntime(journal), ScriptedModel([], name="desk")).resume("s6")  # a second attempt
    assert strip_ts(await recorded_events(journal, "s6")) == strip_ts(events)
    assert await journal.sessions() == ["s6", "s6__route_billing"]
