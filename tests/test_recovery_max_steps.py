"""What ``Recovery(max_steps=...)`` counts, and that it never stops a healthy run within the
tool loop's own limit: a step is a model turn (or a classification, dispatch, plan, capability
step), a tool call is part of its turn (only its retries count), and by default there is no cap
beyond the run's own limits."""

from __future__ import annotations

import pytest

from jeeves_router import Agent, tool
from jeeves_router.architectures.react import ToolLoop
from jeeves_router.recovery import Recovery
from jeeves_router.testing import Call, RecordedSleeps, Reply, ScriptedModel


def looping_agent(turns: int, recovery: Recovery, *, max_turns: int) -> tuple[Agent, list[int]]:
    """An agent whose model looks a page up ``turns`` times, then answers."""
    pages: list[int] = []

    @tool
    def read_page(page: int) -> str:
        """Read one page."""
        pages.append(page)
        return f"page {page}"

    script: list[object] = [Reply(calls=[Call("read_page", {"page": n})]) for n in range(turns)]
    model = ScriptedModel([*script, "Read them all."])  # type: ignore[list-item]
    agent = Agent(
        "Reader.",
        name="reader",
        model=model,
        tools=[read_page],
        max_turns=max_turns,
        architecture=ToolLoop(recovery=recovery),
    )
    return agent, pages


@pytest.mark.anyio
async def test_a_healthy_100_turn_tool_loop_is_not_stopped_by_the_default_recovery() -> None:
    agent, pages = looping_agent(100, Recovery(sleep=RecordedSleeps()), max_turns=120)
    result = await agent.run("read the book")
    assert result.status == "ok" and result.output == "Read them all."
    assert pages == list(range(100))


@pytest.mark.anyio
async def test_a_tool_loop_at_its_own_turn_limit_ends_max_turns_not_critical() -> None:
    agent, pages = looping_agent(300, Recovery(sleep=RecordedSleeps()), max_turns=250)
    result = await agent.run("read the book")
    assert result.status == "max_turns" and result.report is None and len(pages) == 250


@pytest.mark.anyio
async def test_an_explicit_max_steps_counts_model_turns_not_their_tool_calls() -> None:
    agent, pages = looping_agent(3, Recovery(max_steps=4, sleep=RecordedSleeps()), max_turns=10)
    result = await agent.run("read three pages")
    assert result.status == "ok" and pages == [0, 1, 2]  # 4 model turns, 3 tool calls: 4 steps

    agent, pages = looping_agent(3, Recovery(max_steps=3, sleep=RecordedSleeps()), max_turns=10)
    result = await agent.run("read three pages")
    assert result.status == "critical" and result.report is not None
    assert result.report["reason"] == "max_steps" and result.report["counters"]["steps"] == 4
    assert pages == [0, 1, 2]


@pytest.mark.anyio
async def test_a_retried_model_turn_counts_as_a_step() -> None:
    model = ScriptedModel([OSError("connection reset"), "Fine."])
    sleeps = RecordedSleeps()
    agent = Agent("A.", name="a", model=model, architecture=ToolLoop(recovery=Recovery(max_steps=1, sleep=sleeps)))
    result = await agent.run("hi")
    assert result.status == "critical" and result.report is not None and result.report["reason"] == "max_steps"
    agent = Agent(
        "A.",
        name="a",
        model=ScriptedModel([OSError("reset"), "Fine."]),
        architecture=ToolLoop(recovery=Recovery(max_steps=2, sleep=RecordedSleeps())),
    )
    assert (await agent.run("hi")).output == "Fine."


def test_the_default_is_no_cap_and_a_cap_must_be_positive() -> None:
    from jeeves_router import UsageError

    assert Recovery().max_steps is None and Recovery().limits.max_steps is None
    with pytest.raises(UsageError, match="max_steps"):
        Recovery(max_steps=0)
