"""Seams on top of the engine: tracing, the trace page and the CLI meeting failures, secrets and replays.

* A provider error that quotes the API key (a sentinel that is not key-shaped, as a
  self-hosted server's key may be): no span attribute, span event or span status of the
  failed attempt or of the failed run carries it.
* A session with a run in flight (another process is writing it) or a run cut before its
  first step was recorded: ``jeeves-router trace`` still draws the session.
* ``execute_tool`` spans, like ``chat`` spans, stand for real executions: none for a call
  answered by the run's ledger on a recovery retry, none on a replay.
* A desk served over MCP reports a failed run by its error type, as the HTTP server does:
  the exception's text (which may quote a key) stays out of the reply.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import anyio
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from typer.testing import CliRunner

from jeeves_router import Agent, Recovery, Router, RouterRoute, tool
from jeeves_router.cli import app
from jeeves_router.errors import ModelError
from jeeves_router.journal import JournalRuntime, MemoryJournal, SQLiteJournal
from jeeves_router.testing import Call, FunctionModel, RecordedSleeps, ScriptedModel
from tests.loopback import LoopbackServer, Reply, Status, loopback  # noqa: F401
from tests.test_logging import loopback_billing_desk
from tests.test_tracing import by_name, spans  # noqa: F401  (fixture)

#: A self-hosted server's key: nothing about its shape says "secret".
SENTINEL_KEY = "vllm-5ENTINEL-0123456789abcdef"


def span_text(exporter: InMemorySpanExporter) -> str:
    """Everything a span exporter would send: attributes, events with their attributes, statuses."""
    out = []
    for s in exporter.get_finished_spans():
        events = [(e.name, dict(e.attributes or {})) for e in s.events]
        out.append(json.dumps([s.name, dict(s.attributes or {}), events, s.status.description], default=str))
    return "\n".join(out)


@pytest.mark.anyio
async def test_spans_of_a_failed_provider_call_never_carry_the_api_key(
    spans: InMemorySpanExporter,  # noqa: F811
    loopback: LoopbackServer,  # noqa: F811
) -> None:
    echo = f"Incorrect API key provided: {SENTINEL_KEY}."
    loopback.script(Status(503, message=echo), Status(401, message=echo))
    desk = loopback_billing_desk(loopback, api_key=SENTINEL_KEY)
    with pytest.raises(ModelError) as info:
        await desk.run("charged twice", session_id="k-1")
    assert loopback.requests[0].headers["authorization"] == f"Bearer {SENTINEL_KEY}"  # it was sent
    assert SENTINEL_KEY not in str(info.value)  # the adapter's error masks it ...
    failed, refused = by_name(spans, "chat gpt-4.1-mini")
    assert [s.attributes["error.type"] for s in (failed, refused)] == ["503", "401"]  # type: ignore[index]
    assert [e.name for e in refused.events] == ["exception"]  # the failure is still recorded ...
    text = span_text(spans)
    assert "HTTP 401" in text
    assert SENTINEL_KEY not in text and SENTINEL_KEY[5:17] not in text  # ... but never the key


async def _cut_before_the_first_step(agent: Agent, session_id: str) -> None:
    async with agent.stream("and the second one?", session_id=session_id) as events:
        async for ev in events:
            assert ev.kind == "run.started"
            break  # closed before the classification was recorded: the run is in flight as far as the file says


def _desk(db: Path) -> Agent:
    billing = Agent("b", name="billing", model=ScriptedModel(["Refunded."] * 2, name="billing"))
    return Agent(
        "d",
        name="desk",
        model=ScriptedModel(["route: billing\nconfidence: 0.9"] * 2, name="clf"),
        architecture=Router([RouterRoute("billing", billing, "payments")]),
        runtime=JournalRuntime(SQLiteJournal(db)),
    )


def test_the_trace_command_draws_a_session_whose_last_run_is_still_in_flight(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    desk = _desk(db)

    async def record() -> None:
        assert (await desk.run("I was charged twice", session_id="s-1")).output == "Refunded."
        await _cut_before_the_first_step(desk, "s-1")

    anyio.run(record)
    out = tmp_path / "trace.html"
    result = CliRunner().invoke(app, ["trace", str(db), "--session", "s-1", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "2 run(s)" in result.output
    page = out.read_text()
    assert "I was charged twice" in page and "and the second one?" in page


def test_the_trace_command_still_refuses_runs_recorded_without_events(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    desk = _desk(db)
    desk.runtime = JournalRuntime(SQLiteJournal(db), record_events=False)

    async def record() -> Any:
        return await desk.run("I was charged twice", session_id="s-1")

    assert anyio.run(record).status == "ok"
    result = CliRunner().invoke(app, ["trace", str(db), "--session", "s-1", "-o", str(tmp_path / "t.html")])
    assert result.exit_code == 2 and "record_events=True" in result.output


@tool
def refund(invoice_id: str) -> str:
    """Refund an invoice."""
    REFUNDS.append(invoice_id)
    return f"{invoice_id} refunded"


REFUNDS: list[str] = []


@pytest.mark.anyio
async def test_a_tool_span_is_one_real_execution_never_a_replayed_or_ledger_answer(
    spans: InMemorySpanExporter,  # noqa: F811
) -> None:
    REFUNDS.clear()
    journal = MemoryJournal()

    def desk() -> Agent:
        billing = Agent(
            "B",
            name="billing",
            tools=[refund],
            model=ScriptedModel(
                [Call("refund", {"invoice_id": "INV-1"}), TimeoutError("upstream"), "Refunded INV-1."], name="billing"
            ),
        )
        return Agent(
            "D",
            name="desk",
            model=ScriptedModel(["route: billing\nconfidence: 0.9"], name="clf"),
            architecture=Router(
                [RouterRoute("billing", billing, "payments")], recovery=Recovery(sleep=RecordedSleeps())
            ),
            runtime=JournalRuntime(journal),
        )

    # the ladder retries the route after the refund completed: the run's ledger answers the call again
    assert (await desk().run("refund INV-1", session_id="t-1")).output == "Refunded INV-1."
    assert REFUNDS == ["INV-1"]
    [executed] = by_name(spans, "execute_tool refund")
    assert executed.attributes["gen_ai.tool.call.id"]  # type: ignore[index]
    assert executed.parent is not None
    failed_run, _ = by_name(spans, "invoke_agent billing")
    assert executed.parent.span_id == failed_run.context.span_id  # under the run that made the call
    spans.clear()
    # a replay of the completed run calls no model and no tool: no chat span, no tool span
    assert (await desk().resume("t-1")).output == "Refunded INV-1."
    assert REFUNDS == ["INV-1"]
    names = [s.name for s in spans.get_finished_spans()]
    assert "invoke_agent desk" in names
    assert not [n for n in names if n.startswith(("chat ", "execute_tool "))]


@pytest.mark.anyio
async def test_a_desk_served_over_mcp_reports_a_failed_run_by_its_type_only(caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("mcp")
    from jeeves_router.mcp.server import router_server

    def broken(request: object) -> str:
        raise RuntimeError(f"upstream said: bad key {SENTINEL_KEY}")

    billing = Agent("b", name="billing", model=FunctionModel(broken))
    desk = Agent(
        "Support desk.",
        name="desk",
        model=ScriptedModel(["route: billing\nconfidence: 0.9"], name="clf"),
        architecture=Router([RouterRoute("billing", billing, "payments")]),
    )
    caplog.set_level(logging.DEBUG)
    result = await router_server(desk).call_tool("ask", {"request": "refund"})
    assert result.is_error  # type: ignore[union-attr]
    text = result.content[0].text  # type: ignore[union-attr]
    assert "RuntimeError" in text  # the client learns the run failed, and how ...
    assert SENTINEL_KEY not in text and "upstream said" not in text  # ... not the exception's text, as over HTTP
    assert any(getattr(r, "fields", {}).get("error_type") == "RuntimeError" for r in caplog.records)
    assert SENTINEL_KEY not in caplog.text
