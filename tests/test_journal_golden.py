"""The golden corpus: journals written by every schema version must keep replaying.

``tests/fixtures/journals/v<N>/`` holds a SQLite journal (``desk.db``) and the same entries
as JSON lines (``desk.jsonl``), recorded once from the agent built below by the release
that wrote schema version N. Never regenerate them to make this test pass: a failure means
journals users already have would stop replaying. A new schema version gets a new folder
next to these.

- v1: two turns of a routed desk (classification, a tool call, streamed text).
- v2 (adds ``step.failed`` and the ``claim`` of ``tool.started``): the same two turns, then
  a third whose specialist fails under ``Recovery`` and ends ``critical``; resuming it
  raises the recorded failure again.

(To create a missing corpus: ``python tests/test_journal_golden.py``.)
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from jeeves_router import Agent, Recovery
from jeeves_router.architectures.router.router import Router, RouterRoute
from jeeves_router.events import RunCompleted
from jeeves_router.journal import JournalRuntime, MemoryJournal, SQLiteJournal, recorded_events
from jeeves_router.journal.base import Journal
from jeeves_router.journal.records import SCHEMA_VERSION, Entry
from jeeves_router.messages import Message, TextPart, ToolCallPart
from jeeves_router.models.base import ModelRequest, ModelResponse, ModelStreamItem, ModelTextDelta
from jeeves_router.results import RunResult
from jeeves_router.runtime import Runtime
from jeeves_router.testing import capture_events
from jeeves_router.tools import tool
from jeeves_router.usage import Usage
from tests.journal_helpers import strip_ts

FIXTURES = Path(__file__).parent / "fixtures" / "journals"
CORPUS = FIXTURES / "v1"
TURN1 = "I was charged twice for invoice INV-42"
TURN2 = "Thanks! And what are your opening hours?"
TURN3 = "Refund the duplicate payment of INV-42 right now"  # v2: the specialist fails


class GoldenModel:
    """The model the corpus was recorded with; replay needs only its name."""

    live = True

    @property
    def name(self) -> str:
        return "golden:desk-v1"

    async def request(self, request: ModelRequest) -> ModelResponse:
        assert self.live, "replay called the classifier model"
        route = "general" if "hours" in request.messages[-1].text else "billing"
        return ModelResponse((TextPart(f"route: {route}\nconfidence: 0.87"),), Usage(40, 6, 0, 1, 0.0001), "end", "g")

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        assert self.live, "replay called a specialist model"
        last = request.messages[-1]
        if last.role == "user" and last.text == TURN3:
            yield ModelTextDelta("Refunding ")
            raise ConnectionResetError("the payment service hung up")
        if last.role == "user" and request.tools:
            yield ModelResponse(
                (ToolCallPart("call_1", "lookup_invoice", {"invoice": "INV-42"}),),
                Usage(80, 12, 0, 1, 0.0002),
                "tool_calls",
                "g",
            )
            return
        chunks = (
            ["We open ", "9 to 5."] if last.role == "user" else ["INV-42 was paid twice; ", "a refund is on its way."]
        )
        for ch in chunks:
            yield ModelTextDelta(ch)
        yield ModelResponse((TextPart("".join(chunks)),), Usage(90, 14, 0, 1, 0.0003), "end", "g")


class _Silent(GoldenModel):
    live = False


def golden_desk(runtime: Runtime, model: GoldenModel, *, recovery: Recovery | None = None) -> Agent:
    @tool
    def lookup_invoice(invoice: str) -> str:
        """Look up an invoice's payments."""
        assert model.live, "replay called the tool"
        return f"{invoice}: two payments of 19.90 EUR"

    billing = Agent("You resolve payments.", name="billing", model=model, tools=[lookup_invoice], runtime=runtime)
    general = Agent("You answer everything else.", name="general", model=model, runtime=runtime)
    routes = [RouterRoute("billing", billing, "payments"), RouterRoute("general", general, "anything else")]
    return Agent(
        "Support desk",
        name="desk",
        model=model,
        runtime=runtime,
        architecture=Router(routes, fallback_route="general", require_confidence_above=0.5, recovery=recovery),
    )


def _recovery(version: int) -> Recovery | None:
    """The desk of v1 had no recovery; v2's recovers (its third turn ends ``critical``)."""
    return None if version == 1 else Recovery()


async def _turns(runtime: Runtime, model: GoldenModel, version: int) -> None:
    desk = golden_desk(runtime, model, recovery=_recovery(version))
    first = await capture_events(desk, TURN1, session_id="golden-1")
    done = first[-1]
    assert isinstance(done, RunCompleted)
    history: tuple[Message, ...] = (Message("user", (TextPart(TURN1),)), *done.result.messages[1:])
    await capture_events(desk, TURN2, session_id="golden-1", history=history)
    if version >= 2:
        third = await desk.run(TURN3, session_id="golden-1")
        assert third.status == "critical", third


async def _replay(journal: Journal, model: GoldenModel, version: int = 1) -> list[RunResult]:
    """Replay every recorded turn of the session through ``resume`` (the only replay path)."""
    desk = golden_desk(JournalRuntime(journal, strict=True), model, recovery=_recovery(version))
    starts = await journal.read("golden-1", types=("run.start",))
    run_ids = list(dict.fromkeys(e.run_id for e in starts))
    assert len(run_ids) == (2 if version == 1 else 3)
    return [await desk.resume("golden-1", run_id=rid) for rid in run_ids]


def _load_jsonl(corpus: Path = CORPUS) -> list[Entry]:
    return [Entry.model_validate_json(line) for line in (corpus / "desk.jsonl").read_text().splitlines() if line]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_the_v1_sqlite_corpus_replays_without_calling_a_model(tmp_path: Path) -> None:
    shutil.copy(CORPUS / "desk.db", tmp_path / "desk.db")
    journal = SQLiteJournal(tmp_path / "desk.db")
    recorded = strip_ts(await recorded_events(journal, "golden-1"))
    first, second = await _replay(journal, _Silent())
    assert first.output == "INV-42 was paid twice; a refund is on its way."
    assert second.route == "general"
    # the replay recorded its events again (a new attempt of each run): the same stream
    assert strip_ts(await recorded_events(journal, "golden-1")) == recorded
    await journal.aclose()


@pytest.mark.anyio
async def test_the_v1_json_lines_corpus_reads_back_and_replays() -> None:
    entries = _load_jsonl()
    assert {e.v for e in entries} == {1}
    journal = MemoryJournal()
    await journal.append(entries)
    recorded = strip_ts(await recorded_events(journal, "golden-1"))
    first, second = await _replay(journal, _Silent())
    assert first.output == "INV-42 was paid twice; a refund is on its way."
    assert second.route == "general"
    assert strip_ts(await recorded_events(journal, "golden-1")) == recorded


def _untimed(value: object) -> object:
    """``value`` without the recovery report's measured durations (``elapsed_s``, ``duration_s``)."""
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if k not in ("elapsed_s", "duration_s")}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


def _with_critical_confidence(events: object, confidence: float) -> object:
    """``events`` with ``confidence`` in each routed ``critical`` result that recorded none."""
    assert isinstance(events, list)
    fixed = []
    for ev in events:
        result = ev.get("result") if isinstance(ev, dict) else None
        if isinstance(result, dict) and result.get("status") == "critical" and result.get("route"):
            assert result.get("confidence") is None
            ev = {**ev, "result": {**result, "confidence": confidence}}
        fixed.append(ev)
    return fixed


def _with_report_path(value: object) -> object:
    """``value`` with ``path`` in each recovery report that recorded none (the run's path, joined)."""
    if isinstance(value, list):
        return [_with_report_path(v) for v in value]
    if not isinstance(value, dict):
        return value
    fixed = {k: _with_report_path(v) for k, v in value.items()}
    report = fixed.get("report")
    if isinstance(report, dict) and "path" not in report:
        fixed["report"] = {**report, "path": "/".join(fixed["path"])}
    return fixed


def _with_not_retried(value: object, why: str) -> object:
    """``value`` with ``why`` as ``not_retried`` in each report of a RETRIABLE failure not retried
    because its text had reached the consumer (a field added since the corpus was written)."""
    if isinstance(value, list):
        return [_with_not_retried(v, why) for v in value]
    if not isinstance(value, dict):
        return value
    fixed = {k: _with_not_retried(v, why) for k, v in value.items()}
    report = fixed.get("report")
    if isinstance(report, dict) and (report.get("severity"), report.get("reason")) == ("retriable", "output_started"):
        fixed["report"] = {**report, "not_retried": report.get("not_retried", why)}
    return fixed


def _without_failed_message(events: object) -> object:
    """``events`` with each ``run.failed`` message empty, as a run without ``expose_details`` sends it."""
    assert isinstance(events, list)
    return [{**e, "message": ""} if isinstance(e, dict) and e.get("kind") == "run.failed" else e for e in events]


def _check_v2(results: list[RunResult]) -> None:
    first, second, third = results
    assert first.output == "INV-42 was paid twice; a refund is on its way."
    assert second.route == "general"
    assert third.status == "critical" and third.report is not None
    assert third.confidence == 0.87  # the classification that chose the route that failed
    # the recorded failure, raised again where it happened: text had reached the consumer, so not retried
    assert third.report["error"] == {"type": "ConnectionResetError"}
    assert (third.report["severity"], third.report["reason"]) == ("retriable", "output_started")
    assert third.report["attempts"] == {"classify": 1, "route:billing": 1}
    assert "reached the consumer" in third.report["not_retried"]  # why the RETRIABLE was not followed


@pytest.mark.anyio
async def test_the_v2_sqlite_corpus_replays_its_failure_without_calling_a_model(tmp_path: Path) -> None:
    corpus = FIXTURES / "v2"
    shutil.copy(corpus / "desk.db", tmp_path / "desk.db")
    journal = SQLiteJournal(tmp_path / "desk.db")
    kinds = {e.record.type for sid in await journal.sessions() for e in await journal.read(sid)}
    assert {"step.failed", "tool.started", "model", "step"} <= kinds
    recorded = _untimed(strip_ts(await recorded_events(journal, "golden-1")))
    results = await _replay(journal, _Silent(), version=2)
    _check_v2(results)
    # the same stream again, but for the report's timings (a replay measures its own) and the
    # critical result's confidence, the report's path and its not_retried, which the corpus's version
    # left out (added since), and the run.failed message it kept (since, shown only under
    # Recovery(expose_details=True))
    why = results[2].report["not_retried"]  # type: ignore[index]
    expected = _without_failed_message(
        _with_not_retried(_with_report_path(_with_critical_confidence(recorded, 0.87)), why)
    )
    assert _untimed(strip_ts(await recorded_events(journal, "golden-1"))) == expected
    await journal.aclose()


@pytest.mark.anyio
async def test_the_v2_json_lines_corpus_reads_back_and_replays() -> None:
    entries = _load_jsonl(FIXTURES / "v2")
    assert {e.v for e in entries} == {2}
    journal = MemoryJournal()
    await journal.append(entries)
    _check_v2(await _replay(journal, _Silent(), version=2))


async def _generate() -> None:
    """Write the corpus of the current schema version, if its folder is still empty."""
    version = SCHEMA_VERSION
    corpus = FIXTURES / f"v{version}"
    if (corpus / "desk.db").exists() or (corpus / "desk.jsonl").exists():
        raise SystemExit(f"{corpus} already holds a corpus; a corpus is never regenerated")
    corpus.mkdir(parents=True, exist_ok=True)
    journal = SQLiteJournal(corpus / "desk.db")
    await _turns(JournalRuntime(journal), GoldenModel(), version)
    lines = [e.body() for sid in await journal.sessions() for e in await journal.read(sid)]
    await journal.aclose()
    (corpus / "desk.jsonl").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    anyio.run(_generate)
