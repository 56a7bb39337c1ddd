"""The trace page draws a run whose attempt was cut off (``run.end`` of status ``cut``) as cut:
not as running (it runs no more) and not as failed (it raised nothing; it can be resumed)."""

from __future__ import annotations

import re
from pathlib import Path

import anyio
import pytest
from typer.testing import CliRunner

from jeeves_router import Agent, tool
from jeeves_router.cli import app
from jeeves_router.events import ToolCalled
from jeeves_router.journal import JournalRuntime, SQLiteJournal
from jeeves_router.journal.records import Entry, RunStartRecord
from jeeves_router.journal.trace_data import load_trace
from jeeves_router.journal.trace_html import render_trace_html
from jeeves_router.testing import Call, ScriptedModel


@tool
def refund(invoice: str) -> str:
    """Refund an invoice."""
    return f"refunded {invoice}"


def clerk(journal: SQLiteJournal) -> Agent:
    model = ScriptedModel([Call("refund", {"invoice": "INV-7"}), "Refunded INV-7."])
    return Agent("Refunds.", name="clerk", model=model, tools=[refund], runtime=JournalRuntime(journal))


async def cut_at_the_tool_call(path: Path) -> None:
    """Run the clerk and close its stream when it calls the tool: the journal ends the attempt ``cut``."""
    journal = SQLiteJournal(path)
    async with clerk(journal).stream("refund INV-7", session_id="s") as events:
        async for ev in events:
            if isinstance(ev, ToolCalled):
                break
    ends = [e.record.status for e in await journal.read("s", types=("run.end",))]  # type: ignore[union-attr]
    assert ends == ["cut"]
    await journal.aclose()


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


@pytest.mark.anyio
async def test_a_cut_run_and_the_steps_it_left_open_are_cut(tmp_path: Path) -> None:
    await cut_at_the_tool_call(tmp_path / "j.db")
    journal = SQLiteJournal(tmp_path / "j.db")
    (run,) = (await load_trace(journal, "s")).runs
    assert (run.status, run.root.status) == ("cut", "cut")
    (tool_node,) = [n for _, n in run.root.walk() if n.kind == "tool"]
    assert tool_node.status == "cut"  # its result never came: cut with the run, not still running
    assert all(n.status != "running" for _, n in run.root.walk())
    html = render_trace_html(await load_trace(journal, "s"))
    assert "Run 1 · cut ·" in _text(html) and "cut off before it ended" in html
    assert "running" not in _text(html)
    assert re.search(
        r'<div class="row cut"[^>]*><div class="lab"[^>]*><span class="kind k-run">run</span>clerk · cut', html
    )
    assert '<div class="row bad"' not in html  # not drawn as failed
    await journal.aclose()


@pytest.mark.anyio
async def test_a_run_not_ended_is_still_drawn_as_running(tmp_path: Path) -> None:
    journal = SQLiteJournal(tmp_path / "j.db")
    start = RunStartRecord(agent="clerk", prompt="refund INV-7", input_digest="d")
    await journal.append([Entry(session_id="s", run_id="r1", record=start)])
    (run,) = (await load_trace(journal, "s")).runs
    assert (run.status, run.root.status) == ("running", "running")
    assert "cut off" not in render_trace_html(await load_trace(journal, "s"))
    await journal.aclose()


def test_the_trace_command_writes_a_cut_run_as_cut(tmp_path: Path) -> None:
    anyio.run(cut_at_the_tool_call, tmp_path / "j.db")
    out = tmp_path / "t.html"
    result = CliRunner().invoke(app, ["trace", str(tmp_path / "j.db"), "--session", "s", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "Run 1 · cut ·" in _text(out.read_text(encoding="utf-8"))


@pytest.mark.anyio
async def test_a_failed_run_ends_the_steps_it_left_open_as_failed(tmp_path: Path) -> None:
    from jeeves_router.errors import ToolOutcomeUnknown

    @tool
    def charge(invoice: str) -> str:
        """Charge an invoice."""
        raise ToolOutcomeUnknown("the payment service timed out")  # no recovery: the run raises

    journal = SQLiteJournal(tmp_path / "j.db")
    model = ScriptedModel([Call("charge", {"invoice": "INV-7"}), "Charged."])
    agent = Agent("Charges.", name="clerk", model=model, tools=[charge], runtime=JournalRuntime(journal))
    with pytest.raises(ToolOutcomeUnknown):
        await agent.run("charge INV-7", session_id="s")
    (run,) = (await load_trace(journal, "s")).runs
    assert (run.status, run.root.status) == ("failed", "failed")
    (tool_node,) = [n for _, n in run.root.walk() if n.kind == "tool"]
    assert tool_node.status == "failed"  # it ended with the run, it is not still running
    html = render_trace_html(await load_trace(journal, "s"))
    assert "running" not in _text(html) and "cut off" not in html
    await journal.aclose()
