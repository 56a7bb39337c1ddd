"""A retry's tool call answered from the attempt ledger says so in its ``tool.result`` event and on the trace page.

A Router retries a specialist that refunded, then failed: the retried model asks for the
same refund, and the ledger answers it with the first attempt's outcome, so the refund is
paid once. The retry's ``tool.called`` / ``tool.result`` pair still reached the consumer, and
the journal's trace page drew it as a second refund that ran (status ok), so an operator
checking whether a customer was refunded twice read that they were. Now the retry's
``tool.result`` has ``from_ledger=True`` and the trace page labels the call "answered from an
earlier attempt (not run again)"; a call that ran has ``from_ledger=False``.
"""

from __future__ import annotations

import html

import pytest

from jeeves_router.events import ToolResult
from jeeves_router.journal import JournalRuntime, MemoryJournal
from jeeves_router.journal.trace_data import load_trace
from jeeves_router.journal.trace_html import render_trace_html
from jeeves_router.testing import capture_events
from tests.test_seams_journal import refund_desk

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("journaled", [False, True])
async def test_a_retried_refund_answered_from_the_ledger_is_marked_in_its_result_event(journaled: bool) -> None:
    refunds: list[str] = []
    agent, _ = refund_desk(None, refunds)
    if journaled:
        agent.runtime = JournalRuntime(MemoryJournal())
    events = await capture_events(agent, "refund INV-7", session_id="s")
    assert events[-1].result.status == "ok" and refunds == ["INV-7"]  # type: ignore[union-attr]
    results = [(e.tool, e.content, e.from_ledger) for e in events if isinstance(e, ToolResult)]
    assert results == [("refund", "refunded INV-7", False), ("refund", "refunded INV-7", True)]


async def test_the_trace_page_shows_the_retrys_refund_as_not_run_again() -> None:
    refunds: list[str] = []
    agent, _ = refund_desk(None, refunds)
    journal = MemoryJournal()
    agent.runtime = JournalRuntime(journal)
    assert (await agent.run("refund INV-7", session_id="s")).status == "ok"
    trace = await load_trace(journal, "s")
    tools = [n for _, n in trace.runs[0].root.walk() if n.kind == "tool"]
    assert [(n.label, n.data.get("from_ledger")) for n in tools] == [("refund", None), ("refund", True)]
    page = html.unescape(render_trace_html(trace))
    assert "refund(invoice='INV-7') · answered from an earlier attempt (not run again)" in page
    assert page.count("answered from an earlier attempt") == 1
    assert refunds == ["INV-7"]
