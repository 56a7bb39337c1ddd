"""``jeeves-router trace``: a recorded session as one self-contained HTML page."""

from __future__ import annotations

import re
from pathlib import Path

import anyio
import pytest
from typer.testing import CliRunner

from jeeves_router import Agent, Recovery, Router, RouterRoute, tool
from jeeves_router.classify.types import Classification, ClassifyRequest, ClassifyResult
from jeeves_router.cli import app
from jeeves_router.journal import JournalRuntime, SQLiteJournal
from jeeves_router.journal.trace_data import load_trace
from jeeves_router.testing import Call, Chunks, ScriptedModel

SESSION = "demo-7"


TABLE = {
    "charged": (("billing", 0.82), ("general", 0.11), ("technical", 0.07)),
    "500": (("technical", 0.41), ("general", 0.33), ("billing", 0.26)),
}


class RankingClassifier:
    """Scores every route, as an embedded classifier does (keyword table, deterministic)."""

    async def classify(self, request: ClassifyRequest) -> ClassifyResult:
        key = next(k for k in TABLE if k in request.text)
        scores = TABLE[key]
        (best, conf), (second, conf2) = scores[0], scores[1]
        c = Classification(best, conf, "ok", f"{best} {conf}", runner_up=second, runner_up_confidence=conf2)
        return ClassifyResult(c, stage="embedding", scores=scores)


@tool
def lookup_invoice(invoice_id: str) -> dict[str, object]:
    """Look up an invoice."""
    return {"id": invoice_id, "amount": 42.0, "status": "paid twice"}


async def _no_wait(_: float) -> None:
    return None


def build_desk(runtime: JournalRuntime | None = None) -> Agent:
    billing = Agent(
        "Billing.",
        name="billing",
        model=ScriptedModel(
            [
                TimeoutError("upstream timed out"),  # the first dispatch fails and is retried
                Call("lookup_invoice", {"invoice_id": "INV-1001"}),
                Chunks("Invoice INV-1001 was paid twice; ", "I refunded 42.00."),
            ],
            name="billing-model",
        ),
        tools=[lookup_invoice],
    )
    technical = Agent("Tech.", name="technical", model=ScriptedModel([], name="tech-model"))
    general = Agent("General.", name="general", model=ScriptedModel(["Could you send the request id?"], name="gen"))
    return Agent(
        "Support desk",
        name="desk",
        architecture=Router(
            [
                RouterRoute("billing", billing, "payments"),
                RouterRoute("technical", technical, "errors"),
                RouterRoute("general", general, "anything else"),
            ],
            classifier=RankingClassifier(),
            fallback_route="general",
            require_confidence_above=0.6,
            recovery=Recovery(sleep=_no_wait, expose_details=True),  # the page shows what the journal kept
        ),
        runtime=runtime,
    )


def record_demo(path: Path) -> Path:
    """Two turns of one session, journaled to ``path``: a retried billing run and a fallback."""

    async def main() -> None:
        journal = SQLiteJournal(path)
        desk = build_desk(JournalRuntime(journal))
        first = await desk.run("I was charged twice for INV-1001", session_id=SESSION)
        second = await desk.run("The API returns 500", session_id=SESSION)
        assert (first.route, second.status) == ("billing", "fallback")
        await journal.aclose()

    anyio.run(main)
    return path


desk = build_desk()  # for --agent tests.test_trace_page:desk


def write_page(tmp_path: Path, *, with_graph: bool = True) -> str:
    db = record_demo(tmp_path / "desk.db")
    out = tmp_path / "trace.html"
    args = ["trace", str(db), "--session", SESSION, "-o", str(out)]
    result = CliRunner().invoke(app, [*args, "--agent", "tests.test_trace_page:desk"] if with_graph else args)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"wrote {out} (2 run(s), ")
    return out.read_text(encoding="utf-8")


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_trace_data_rebuilds_the_run_tree(tmp_path: Path) -> None:
    db = record_demo(tmp_path / "desk.db")

    async def read() -> list[tuple[int, str, str, str]]:
        journal = SQLiteJournal(db, create=False)
        try:
            trace = await load_trace(journal, SESSION)
        finally:
            await journal.aclose()
        assert [r.status for r in trace.runs] == ["ok", "fallback"]
        first = trace.runs[0]
        assert first.decisions[0]["scores"] == [("billing", 0.82), ("general", 0.11), ("technical", 0.07)]
        assert first.usage_by_route["billing"]["requests"] == 3  # the timed-out request counts too
        return [(d, n.kind, n.label, n.status) for d, n in first.root.walk()]

    tree = anyio.run(read)
    assert [(d, kind) for d, kind, _, _ in tree] == [
        (0, "run"),
        (1, "decision"),
        (1, "note"),  # router.dispatched
        (1, "run"),  # billing, failed
        (1, "note"),  # recovery.retry
        (1, "note"),  # router.dispatched again
        (1, "run"),  # billing, ok
        (2, "model"),
        (2, "tool"),
        (2, "model"),
    ]
    assert tree[3][2:] == ("billing", "failed") and tree[4][2].startswith("recovery.retry")
    assert tree[7][2:] == ("test:billing-model", "tool_calls") and tree[8][2:] == ("lookup_invoice", "ok")


def test_page_shows_decision_steps_tokens_tools_retries_and_totals(tmp_path: Path) -> None:
    html = write_page(tmp_path)
    text = _text(html)
    assert "Decision: route billing with confidence 0.820 against threshold 0.6 (classifier embedding" in text
    assert "runner-up general (0.110)" in text
    for row in ("billing ✓ 0.820", "general 0.110", "technical 0.070 below threshold"):
        assert row in text
    assert "Decision: route technical with confidence 0.410 against threshold 0.6" in text
    assert "runner-up general (0.330) → fallback to general (low_confidence)" in text
    assert "router.fallback" in text and "reason=low_confidence" in text
    assert "recovery.retry" in text and "upstream timed out" in text
    assert "lookup_invoice(invoice_id=&#x27;INV-1001&#x27;)" in html
    assert "paid twice" in html  # the tool's result, in the step's details
    assert "test:billing-model · 10→5 tok · tool_calls" in text
    assert "Totals per route" in text and re.search(r"billing 20 10 3 \$0\.000000", text)
    assert "Agent graph" in text and "flowchart TD" in text and "fallback: below threshold / unknown" in text


def test_page_is_self_contained(tmp_path: Path) -> None:
    html = write_page(tmp_path, with_graph=False)
    assert html.startswith("<!DOCTYPE html>") and "</html>" in html
    assert not re.search(r"https?:|//cdn|\bsrc=|<link\b|@import|url\(", html, re.I)
    assert html.count("<script>") == 1 and html.count("<style>") == 1
    assert "Agent graph" not in html


def test_bad_session_and_missing_file_exit_2(tmp_path: Path) -> None:
    db = record_demo(tmp_path / "desk.db")
    result = CliRunner().invoke(app, ["trace", str(db), "--session", "nope", "-o", str(tmp_path / "t.html")])
    assert result.exit_code == 2 and "'nope' has no recorded run" in result.stderr
    result = CliRunner().invoke(app, ["trace", str(tmp_path / "missing.db"), "--session", SESSION])
    assert result.exit_code == 2 and "error:" in result.stderr
    assert not (tmp_path / "t.html").exists()


@pytest.mark.parametrize("spec", ["tests.test_trace_page:nothing", "tests.test_trace_page"])
def test_bad_agent_exits_2(tmp_path: Path, spec: str) -> None:
    db = record_demo(tmp_path / "desk.db")
    result = CliRunner().invoke(app, ["trace", str(db), "--session", SESSION, "--agent", spec])
    assert result.exit_code == 2 and "--agent" in result.stderr


@pytest.mark.anyio
async def test_a_step_answered_from_an_earlier_plan_is_shown_as_not_run_again() -> None:
    from jeeves_router.journal import MemoryJournal
    from jeeves_router.journal.trace_html import render_trace_html
    from tests.test_capabilities_replan_repeat import failing_once, plan, replanned_desk

    refunds: list[str] = []
    desk, _ = replanned_desk(refunds, failing_once(), plan("refunds", "notify"))
    journal = MemoryJournal()
    desk.runtime = JournalRuntime(journal)
    assert (await desk.run("refund INV-7 and tell me", session_id="cap-7")).status == "ok"
    trace = await load_trace(journal, "cap-7")
    caps = [n for _, n in trace.runs[0].root.walk() if n.kind == "capability"]
    assert [(n.label, n.data.get("step"), n.data.get("answered_from")) for n in caps] == [
        ("refunds", 1, None),
        ("notify", 2, None),
        ("refunds", 3, 1),
        ("notify", 4, None),
    ]
    page = render_trace_html(trace)
    assert "refunds · step 3 · answered from step 1 (not run again)" in page
    assert page.count("not run again") == 1
