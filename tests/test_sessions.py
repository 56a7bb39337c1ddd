"""Multi-turn sessions from Python: the journal is the session store."""

from __future__ import annotations

from pathlib import Path

import pytest

from jeeves_router import Agent
from jeeves_router.errors import UsageError
from jeeves_router.journal import JournalRuntime, MemoryJournal, SessionHistory, SQLiteJournal, session_turns
from jeeves_router.messages import assistant, user
from jeeves_router.models.base import ModelRequest
from jeeves_router.testing import FunctionModel
from tests.serve_apps import build_desk, desk_with

pytestmark = pytest.mark.anyio


def echo_agent(journal: MemoryJournal | SQLiteJournal, history: SessionHistory | None, *, name: str = "echo") -> Agent:
    def answer(request: ModelRequest) -> str:
        said = [m.text for m in request.messages[:-1]]
        return f"{request.messages[-1].text}|" + "/".join(said)

    runtime = JournalRuntime(journal, session_history=history)
    return Agent("echo", name=name, model=FunctionModel(answer), runtime=runtime)


async def test_a_run_without_history_sees_the_sessions_earlier_turns() -> None:
    agent = echo_agent(MemoryJournal(), SessionHistory())
    assert (await agent.run("a", session_id="s")).output == "a|"
    assert (await agent.run("b", session_id="s")).output == "b|a/a|"
    assert (await agent.run("c", session_id="s")).output == "c|a/a|/b/b|a/a|"
    assert (await agent.run("x", session_id="other")).output == "x|"


async def test_explicit_history_replaces_the_stored_one() -> None:
    agent = echo_agent(MemoryJournal(), SessionHistory())
    await agent.run("a", session_id="s")
    result = await agent.run("b", session_id="s", history=[user("given"), assistant("ok")])
    assert result.output == "b|given/ok"


async def test_without_session_history_runs_see_only_what_they_are_given() -> None:
    agent = echo_agent(MemoryJournal(), None)
    await agent.run("a", session_id="s")
    assert (await agent.run("b", session_id="s")).output == "b|"


async def test_history_limits_keep_the_newest_turns() -> None:
    def users(request: ModelRequest) -> str:
        return ",".join(m.text for m in request.messages[:-1] if m.role == "user")

    runtime = JournalRuntime(MemoryJournal(), session_history=SessionHistory(max_turns=2))
    agent = Agent("u", name="users", model=FunctionModel(users), runtime=runtime)
    for text in "abcd":
        await agent.run(text, session_id="s")
    assert (await agent.run("e", session_id="s")).output == "c,d"
    short = echo_agent(MemoryJournal(), SessionHistory(max_chars=12))
    await short.run("x" * 10, session_id="t")
    await short.run("y" * 3, session_id="t")
    # the newest turn (yyy and its 26-character answer) is kept whole though over the limit; the older one is dropped
    assert (await short.run("z", session_id="t")).output == "z|yyy/yyy|" + "x" * 10 + "/" + "x" * 10 + "|"


async def test_failed_turns_and_other_agents_turns_stay_out_of_the_history() -> None:
    journal = MemoryJournal()
    calls = {"n": 0}

    def flaky(request: ModelRequest) -> str:
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("down")
        return "fine"

    agent = Agent(
        "f", name="flaky", model=FunctionModel(flaky), runtime=JournalRuntime(journal, session_history=SessionHistory())
    )
    other = echo_agent(journal, SessionHistory(), name="other")
    await agent.run("one", session_id="s")
    with pytest.raises(RuntimeError):
        await agent.run("two", session_id="s")
    await other.run("elsewhere", session_id="s")
    seen: list[int] = []

    def count(request: ModelRequest) -> str:
        seen.append(len(request.messages))
        return "ok"

    agent.model = agent._model = FunctionModel(count)
    await agent.run("three", session_id="s")
    assert seen == [3]  # "one", its answer, and the request
    turns = await session_turns(journal, "s")
    assert [(t.agent, t.prompt, t.status, t.output) for t in turns] == [
        ("flaky", "one", "ok", "fine"),
        ("flaky", "two", "failed", None),
        ("other", "elsewhere", "ok", "elsewhere|"),
        ("flaky", "three", "ok", "ok"),
    ]


async def test_a_new_process_continues_the_session_from_sqlite(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    async with SQLiteJournal(db) as journal:
        await echo_agent(journal, SessionHistory()).run("a", session_id="s")
    async with SQLiteJournal(db) as journal:
        assert (await echo_agent(journal, SessionHistory()).run("b", session_id="s")).output == "b|a/a|"


async def test_resume_replays_the_first_turn_instead_of_loading_history_into_it() -> None:
    journal = MemoryJournal()
    agent = echo_agent(journal, SessionHistory())
    first = await agent.run("a", session_id="s")
    replayed = await echo_agent(journal, SessionHistory()).resume("s")
    assert replayed.output == first.output == "a|"


async def test_routed_turns_record_the_route_for_the_session_view() -> None:
    desk = build_desk()
    desk.runtime = JournalRuntime(MemoryJournal(), session_history=SessionHistory())
    await desk.run("refund please", session_id="s")
    second = await desk.run("thanks", session_id="s")
    assert second.output == "[general] Happy to help (I see 2 earlier messages)."
    assert isinstance(desk.runtime, JournalRuntime)
    turns = await session_turns(desk.runtime.journal, "s")
    assert [(t.route, t.fallback_reason) for t in turns] == [("billing", None), ("general", "low_confidence")]


async def test_a_turn_that_failed_after_routing_keeps_the_route_it_was_sent_to() -> None:
    def broken(request: ModelRequest) -> str:
        raise RuntimeError("specialist down")

    desk = desk_with(FunctionModel(broken))
    desk.runtime = runtime = JournalRuntime(MemoryJournal())
    with pytest.raises(RuntimeError, match="specialist down"):
        await desk.run("refund please", session_id="s")
    [turn] = await session_turns(runtime.journal, "s")
    assert (turn.status, turn.route, turn.confidence, turn.output) == ("failed", "billing", 0.92, None)


def test_session_history_limits_are_checked() -> None:
    with pytest.raises(UsageError, match="max_turns must be a positive integer"):
        SessionHistory(max_turns=0)
    with pytest.raises(UsageError, match="record_events=True"):
        JournalRuntime(MemoryJournal(), session_history=SessionHistory(), record_events=False)
