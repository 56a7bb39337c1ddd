"""Record a routed run, replay it without calling a model, and diverge on purpose."""

from __future__ import annotations

from pathlib import Path

import pytest

from jeeves_router.errors import ReplayDivergence
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


@pytest.mark.anyio
async def test_replay_calls_no_model_and_yields_the_same_events(journal_factory) -> None:  # type: ignore[no-untyped-def]
    live = DeskModel()
    first = await capture_events(build_desk(JournalRuntime(journal_factory()), live), PROMPT, session_id="s1")
    assert live.calls == ["classify:INV-7", "INV-7:1", "INV-7:2"]

    silent = ScriptedModel([], name="desk")  # any call raises ScriptExhausted
    again = await capture_events(build_desk(JournalRuntime(journal_factory()), silent), PROMPT, session_id="s1")
    assert silent.requests == []
    assert strip_ts(again) == strip_ts(first)
    assert again[-1].result.output == "Refund issued: INV-7 was paid twice."  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_replay_serves_each_turn_of_a_multi_turn_session(journal_factory) -> None:  # type: ignore[no-untyped-def]
    live = DeskModel()
    desk = build_desk(JournalRuntime(journal_factory()), live)
    r1 = await desk.run(PROMPT, session_id="s2")
    r2 = await desk.run("hello there", session_id="s2", history=r1.messages)
    assert r2.route == "general"

    silent = ScriptedModel([], name="desk")
    replay = build_desk(JournalRuntime(journal_factory()), silent)
    assert (await replay.run(PROMPT, session_id="s2")).output == r1.output
    assert (await replay.run("hello there", session_id="s2", history=r1.messages)).output == r2.output
    assert silent.requests == []


@pytest.mark.anyio
async def test_a_different_prompt_is_answered_live_not_from_the_record(journal_factory) -> None:  # type: ignore[no-untyped-def]
    await build_desk(JournalRuntime(journal_factory()), DeskModel()).run(PROMPT, session_id="s3")
    other = DeskModel()
    result = await build_desk(JournalRuntime(journal_factory()), other).run("charged twice for INV-9", session_id="s3")
    assert other.calls == ["classify:INV-9", "INV-9:1", "INV-9:2"]
    assert result.output == "Refund issued: INV-9 was paid twice."


@pytest.mark.anyio
async def test_strict_replay_raises_on_a_different_prompt(journal_factory) -> None:  # type: ignore[no-untyped-def]
    await build_desk(JournalRuntime(journal_factory()), DeskModel()).run(PROMPT, session_id="s4")
    silent = ScriptedModel([], name="desk")
    strict = build_desk(JournalRuntime(journal_factory(), strict=True), silent)
    with pytest.raises(ReplayDivergence, match="s4"):
        await strict.run("charged twice for INV-9", session_id="s4")
    assert silent.requests == []
    # the recorded prompt still replays under strict mode
    assert (await strict.run(PROMPT, session_id="s4")).output == "Refund issued: INV-7 was paid twice."


@pytest.mark.anyio
async def test_strict_replay_raises_when_a_step_input_changed() -> None:
    journal = MemoryJournal()
    await build_desk(JournalRuntime(journal), DeskModel()).run(PROMPT, session_id="s5")
    changed = build_desk(JournalRuntime(journal, strict=True), ScriptedModel([], name="desk"))
    changed.architecture.route("billing").agent.instructions = "You resolve payments politely."  # type: ignore[attr-defined]
    with pytest.raises(ReplayDivergence, match="step"):
        await changed.run(PROMPT, session_id="s5")
    # not strict: the changed step is called live, the classification still replays
    live = DeskModel()
    lenient = build_desk(JournalRuntime(journal), live)
    lenient.architecture.route("billing").agent.instructions = "You resolve payments politely."  # type: ignore[attr-defined]
    assert (await lenient.run(PROMPT, session_id="s5")).output == "Refund issued: INV-7 was paid twice."
    assert live.calls == ["INV-7:1", "INV-7:2"]


@pytest.mark.anyio
async def test_recorded_events_are_the_latest_attempt_of_each_run(tmp_path: Path) -> None:
    journal = SQLiteJournal(tmp_path / "j.db")
    runtime = JournalRuntime(journal)
    events = await capture_events(build_desk(runtime, DeskModel()), PROMPT, session_id="s6")
    await build_desk(JournalRuntime(journal), ScriptedModel([], name="desk")).run(
        PROMPT, session_id="s6"
    )  # a second attempt
    assert strip_ts(await recorded_events(journal, "s6")) == strip_ts(events)
    assert await journal.sessions() == ["s6", "s6__route_billing"]
