"""An agent as a tool: the model requests of the agent a tool runs count in the calling run.

A tool that returns the :class:`RunResult` of an agent it ran gives the model the run's
``output`` and its ``usage`` to the calling run (``usage``, and ``usage_by_route`` under the
route that called the tool), through the run's ledger, once: a journal replay counts it
without running the inner agent again, and a retry answered from the ledger adds nothing.
A tool that returns ``.output`` only gives the model the same text and counts nothing (the
run cannot see the inner agent's requests).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from jeeves_router import Agent, Router, RouterRoute
from jeeves_router.errors import ModelError
from jeeves_router.events import RunCompleted
from jeeves_router.journal import JournalRuntime, SQLiteJournal
from jeeves_router.journal.step_results import decode_result, encode_result
from jeeves_router.messages import ToolResultPart
from jeeves_router.recovery import Recovery
from jeeves_router.results import RunResult
from jeeves_router.testing import (
    DEFAULT_USAGE,
    FAILED_USAGE,
    Call,
    RecordedSleeps,
    Reply,
    ScriptedModel,
    StaticClassifier,
)
from jeeves_router.tools import ToolOutcome, tool
from jeeves_router.usage import NO_USAGE, Usage

INNER = Usage(input_tokens=100, output_tokens=40, requests=1, cost_usd=0.25)  # the billing agent's one reply


def inner_agent(*steps: Any) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(list(steps) or ["Balance: 0 EUR."], name="inner")
    return Agent("You know the balances.", name="billing", model=model), model


def with_inner_usage(text: str) -> Reply:
    return Reply(text=text, usage=INNER)


def caller(
    billing: Agent, model: ScriptedModel, *, whole: bool = True, repeatable: bool = False, **kw: object
) -> Agent:
    """An agent whose tool asks ``billing``: returns its RunResult (``whole``) or its ``.output``."""

    @tool(repeatable=repeatable)
    async def ask_billing(question: str) -> RunResult | str | None:
        """Ask the billing specialist."""
        result = await billing.run(question)
        return result if whole else result.output

    return Agent("You help.", name="desk", model=model, tools=[ask_billing], **kw)  # type: ignore[arg-type]


def script() -> list[Any]:
    return [Call("ask_billing", {"question": "balance of ACME?"}, id="c1"), "ACME owes nothing."]


def tool_content(model: ScriptedModel, request: int = 1) -> ToolResultPart:
    part = model.requests[request].messages[-1].parts[0]
    assert isinstance(part, ToolResultPart)
    return part


@pytest.mark.anyio
async def test_a_tool_returning_an_agents_run_counts_its_usage_and_gives_the_model_its_output() -> None:
    billing, inner = inner_agent(with_inner_usage("Balance: 0 EUR."))
    outer = ScriptedModel(script())
    result = await caller(billing, outer).run("Does ACME owe us?")
    assert result.output == "ACME owes nothing."
    assert tool_content(outer).content == "Balance: 0 EUR." and not tool_content(outer).is_error
    assert len(inner.requests) == 1
    assert result.usage == DEFAULT_USAGE + DEFAULT_USAGE + INNER
    assert result.usage.requests == 3 and result.usage.cost_usd == 0.25


@pytest.mark.anyio
async def test_a_tool_returning_the_output_only_gives_the_same_text_and_counts_nothing_more() -> None:
    billing, _ = inner_agent(with_inner_usage("Balance: 0 EUR."))
    outer = ScriptedModel(script())
    result = await caller(billing, outer, whole=False).run("Does ACME owe us?")
    assert tool_content(outer).content == "Balance: 0 EUR."
    assert result.usage == DEFAULT_USAGE + DEFAULT_USAGE  # return the RunResult to have it counted


@pytest.mark.anyio
async def test_an_agent_run_without_an_answer_is_an_error_result_whose_usage_counts() -> None:
    billing, _ = inner_agent(Call("nowhere", {}), Call("nowhere", {}))
    billing.max_turns = 2
    outer = ScriptedModel(script())
    result = await caller(billing, outer).run("Does ACME owe us?")
    part = tool_content(outer)
    assert part.is_error and "max_turns" in part.content and "RunResult(" not in part.content
    assert result.usage.requests == 4


@pytest.mark.anyio
async def test_the_spent_usage_of_an_inner_runs_failure_counts_as_a_failed_model_calls_does() -> None:
    billing, _ = inner_agent(ModelError("overloaded"))
    outer = ScriptedModel(script())
    result = await caller(billing, outer).run("Does ACME owe us?")
    assert tool_content(outer).is_error and tool_content(outer).content == "ask_billing failed: ModelError"
    assert result.usage == DEFAULT_USAGE + DEFAULT_USAGE + FAILED_USAGE


@pytest.mark.anyio
async def test_a_routers_usage_by_route_counts_the_inner_agent_under_the_route_that_called_it() -> None:
    billing, _ = inner_agent(with_inner_usage("Balance: 0 EUR."))
    specialist_model = ScriptedModel(script())
    accounts = caller(billing, specialist_model)
    other = Agent("Other.", name="other", model=ScriptedModel([]))
    desk = Agent(
        "Desk",
        name="front",
        architecture=Router(
            [RouterRoute("accounts", accounts), RouterRoute("other", other)], classifier=StaticClassifier("accounts")
        ),
    )
    result = await desk.run("Does ACME owe us?")
    assert (result.route, result.output) == ("accounts", "ACME owes nothing.")
    assert result.usage_by_route["accounts"] == DEFAULT_USAGE + DEFAULT_USAGE + INNER
    assert "billing" not in result.usage_by_route  # the caller's spend, not a route of this run
    assert sum(result.usage_by_route.values(), Usage()) == result.usage
    assert result.usage.requests == 3


@pytest.mark.anyio
async def test_a_streamed_run_completes_with_the_usage_run_reports() -> None:
    billing, _ = inner_agent(with_inner_usage("Balance: 0 EUR."))
    completed = []
    async with caller(billing, ScriptedModel(script())).stream("Does ACME owe us?") as events:
        async for ev in events:
            if isinstance(ev, RunCompleted) and ev.path == ("desk",):
                completed.append(ev.result)
    billing_again, _ = inner_agent(with_inner_usage("Balance: 0 EUR."))
    ran = await caller(billing_again, ScriptedModel(script())).run("Does ACME owe us?")
    (streamed,) = completed
    assert streamed.usage == ran.usage == DEFAULT_USAGE + DEFAULT_USAGE + INNER


@pytest.mark.anyio
async def test_a_journaled_run_replayed_reports_the_same_usage_without_running_the_inner_agent(tmp_path: Path) -> None:
    journal = SQLiteJournal(tmp_path / "runs.db")
    billing, inner = inner_agent(with_inner_usage("Balance: 0 EUR."))
    first = await caller(billing, ScriptedModel(script()), runtime=JournalRuntime(journal)).run("q", session_id="s1")
    assert first.usage == DEFAULT_USAGE + DEFAULT_USAGE + INNER

    replayed = caller(billing, ScriptedModel([]), runtime=JournalRuntime(SQLiteJournal(tmp_path / "runs.db")))
    again = await replayed.resume("s1")
    assert (again.output, again.usage) == (first.output, first.usage)
    assert len(inner.requests) == 1  # answered from the journal: the inner agent did not run again


@pytest.mark.anyio
async def test_a_journaled_run_resumed_after_the_tool_counts_the_inner_usage_once(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    billing, inner = inner_agent(with_inner_usage("Balance: 0 EUR."))
    crashing = ScriptedModel([*script()[:1], RuntimeError("the process died")])
    with pytest.raises(RuntimeError):
        await caller(billing, crashing, runtime=JournalRuntime(SQLiteJournal(path))).run("q", session_id="s2")

    finishing = ScriptedModel(["ACME owes nothing."])  # the tool call's turn is in the journal
    resumed = await caller(billing, finishing, runtime=JournalRuntime(SQLiteJournal(path))).resume("s2")
    assert resumed.output == "ACME owes nothing." and len(finishing.requests) == 1
    assert tool_content(finishing, 0).content == "Balance: 0 EUR."
    assert len(inner.requests) == 1
    assert resumed.usage == DEFAULT_USAGE + DEFAULT_USAGE + INNER  # the recorded turn, the inner run, the new turn


def test_a_tool_record_written_before_tool_usage_reads_as_no_usage() -> None:
    tag, data = encode_result(ToolOutcome("refunded"))
    del data["usage"]  # a journal written before ToolOutcome had usage
    old = decode_result(tag, data)
    assert old == ToolOutcome("refunded") and old.usage == NO_USAGE
    tag, data = encode_result(ToolOutcome("asked", usage=INNER))
    assert decode_result(tag, data).usage == INNER


def retried_desk(accounts: Agent, **kw: object) -> Agent:
    return Agent(
        "Desk",
        name="front",
        architecture=Router(
            [RouterRoute("accounts", accounts)],
            classifier=StaticClassifier("accounts"),
            recovery=Recovery(sleep=RecordedSleeps()),
        ),
        **kw,  # type: ignore[arg-type]
    )


def failing_once() -> ScriptedModel:
    """The specialist asks billing, then its next call fails; the retry makes the same call and answers."""
    return ScriptedModel([*script()[:1], ModelError("overloaded", severity="retriable"), *script()])


@pytest.mark.anyio
async def test_a_retry_answered_from_the_ledger_does_not_count_the_inner_usage_twice() -> None:
    billing, inner = inner_agent(with_inner_usage("Balance: 0 EUR."))
    specialist_model = failing_once()  # the retry's call is answered from the ledger
    result = await retried_desk(caller(billing, specialist_model)).run("Does ACME owe us?")
    assert (result.status, result.output) == ("ok", "ACME owes nothing.")
    assert len(inner.requests) == 1  # the call ran once
    assert len(specialist_model.requests) == 4
    assert result.usage == DEFAULT_USAGE + FAILED_USAGE + DEFAULT_USAGE + DEFAULT_USAGE + INNER
    assert result.usage_by_route["accounts"] == result.usage


@pytest.mark.anyio
async def test_a_journaled_retry_served_the_recorded_call_of_a_repeatable_tool_counts_it_once(tmp_path: Path) -> None:
    billing, inner = inner_agent(with_inner_usage("Balance: 0 EUR."))
    # the retry is served the recorded first turn and tool call (a repeatable tool: the ledger does
    # not answer it, the journal does), then asks for the answer
    specialist_model = ScriptedModel([*script()[:1], ModelError("overloaded", severity="retriable"), script()[1]])
    accounts = caller(billing, specialist_model, repeatable=True)
    desk = retried_desk(accounts, runtime=JournalRuntime(SQLiteJournal(tmp_path / "runs.db")))
    result = await desk.run("Does ACME owe us?", session_id="s3")
    assert (result.status, result.output) == ("ok", "ACME owes nothing.")
    assert len(inner.requests) == 1 and len(specialist_model.requests) == 3
    assert result.usage == DEFAULT_USAGE + FAILED_USAGE + DEFAULT_USAGE + INNER  # each request sent, once
    again = await retried_desk(accounts, runtime=JournalRuntime(SQLiteJournal(tmp_path / "runs.db"))).resume("s3")
    assert again.usage == result.usage and len(inner.requests) == 1
