"""A retry's function capability answered from the attempt ledger says so in its ``capability.completed`` event.

A Router retries a Capabilities route whose ``charge`` step (a function capability) completed
before a later step failed: the retry's ``charge`` is answered from the ledger with the first
attempt's output, so the card is charged once. A tool call answered that way had
``from_ledger=True`` in its ``tool.result`` and the trace page said "not run again", but the
retry's ``capability.completed`` for ``charge`` looked like a charge that ran (``ok``, no
mark), so an operator reading the events or the trace page saw two charges. Now it has
``from_ledger=True`` and the trace page labels the step "answered from an earlier attempt
(not run again)", as its span event does; a step that ran has ``from_ledger=False``.
"""

from __future__ import annotations

import html

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from jeeves_router.events import CapabilityCompleted
from jeeves_router.journal import JournalRuntime, MemoryJournal
from jeeves_router.journal.trace_data import load_trace
from jeeves_router.journal.trace_html import render_trace_html
from jeeves_router.testing import capture_events
from tests.test_capability_function_calls import Charge, retried_checkout
from tests.test_tracing import by_name, spans  # noqa: F401  (fixture)

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("journaled", [False, True])
async def test_a_retried_charge_answered_from_the_ledger_is_marked_in_its_completed_event(journaled: bool) -> None:
    charge = Charge()
    desk, _, _ = retried_checkout(charge, repeatable=False)
    if journaled:
        desk.runtime = JournalRuntime(MemoryJournal())
    events = await capture_events(desk, "check out", session_id="s")
    assert events[-1].result.status == "ok" and len(charge.keys) == 1  # type: ignore[union-attr]
    done = [(e.capability, e.ok, e.from_ledger) for e in events if isinstance(e, CapabilityCompleted)]
    assert done == [
        ("charge", True, False),
        ("receipt", False, False),  # the receipt failed: the desk runs the route again
        ("charge", True, True),  # the first attempt's charge, not a second one
        ("receipt", True, False),
    ]


async def test_a_retried_repeatable_capability_runs_again_and_is_not_marked() -> None:
    charge = Charge()
    desk, _, _ = retried_checkout(charge, repeatable=True)
    events = await capture_events(desk, "check out", session_id="s")
    assert len(charge.keys) == 2
    assert [e.from_ledger for e in events if isinstance(e, CapabilityCompleted) and e.capability == "charge"] == [
        False,
        False,
    ]


async def test_the_trace_page_shows_the_retrys_charge_as_not_run_again() -> None:
    charge = Charge()
    desk, _, _ = retried_checkout(charge, repeatable=False)
    journal = MemoryJournal()
    desk.runtime = JournalRuntime(journal)
    assert (await desk.run("check out", session_id="s")).status == "ok"
    trace = await load_trace(journal, "s")
    charges = [n for _, n in trace.runs[0].root.walk() if n.kind == "capability" and n.label == "charge"]
    assert [n.data.get("from_ledger") for n in charges] == [None, True]
    page = html.unescape(render_trace_html(trace))
    assert "charge · step 1 · answered from an earlier attempt (not run again)" in page
    assert page.count("answered from an earlier attempt") == 1
    assert len(charge.keys) == 1


async def test_the_span_event_of_the_retrys_charge_says_it_was_not_run_again(
    spans: InMemorySpanExporter,  # noqa: F811
) -> None:
    charge = Charge()
    desk, _, _ = retried_checkout(charge, repeatable=False)
    assert (await desk.run("check out", session_id="s")).status == "ok"
    done = [
        dict(e.attributes or {})
        for span in by_name(spans, "invoke_agent checkout")
        for e in span.events
        if e.name == "jeeves_router.capability.completed"
    ]
    shown = [(s["jeeves_router.capability"], s.get("jeeves_router.capability.from_ledger")) for s in done]
    assert shown == [("charge", None), ("receipt", None), ("charge", True), ("receipt", None)]
