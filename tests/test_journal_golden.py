"""The golden corpus: journals written by schema version 1 must keep replaying.

``tests/fixtures/journals/v1/`` holds a SQLite journal (``desk.db``) and the same entries
as JSON lines (``desk.jsonl``), recorded once from the agent built below. Never
regenerate them to make this test pass: a failure means journals users already have
would stop replaying. A new schema version gets a new folder next to this one.

(To create a missing corpus: ``python tests/test_journal_golden.py``.)
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from jeeves_router import Agent
from jeeves_router.architectures.router.router import Router, RouterRoute
from jeeves_router.events import RunCompleted
from jeeves_router.journal import JournalRuntime, MemoryJournal, SQLiteJournal, recorded_events
from jeeves_router.journal.base import Journal
from jeeves_router.journal.records import Entry
from jeeves_router.messages import Message, TextPart, ToolCallPart
from jeeves_router.models.base import ModelRequest, ModelResponse, ModelStreamItem, ModelTextDelta
from jeeves_router.results import RunResult
from jeeves_router.runtime import Runtime
from jeeves_router.testing import capture_events
from jeeves_router.tools import tool
from jeeves_router.usage import Usage
from tests.journal_helpers import strip_ts

CORPUS = Path(__file__).parent / "fixtures" / "journals" / "v1"
TURN1 = "I was charged twice for invoice INV-42"
TURN2 = "Thanks! And what are your opening hours?"


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


def golden_desk(runtime: Runtime, model: GoldenModel) -> Agent:
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
        architecture=Router(routes, fallback_route="general", require_confidence_above=0.5),
    )


async def _turns(runtime: Runtime, model: GoldenModel) -> list[list[dict[str, object]]]:
    desk = golden_desk(runtime, model)
    first = await capture_events(desk, TURN1, session_id="golden-1")
    done = first[-1]
    assert isinstance(done, RunCompleted)
    history: tuple[Message, ...] = (Message("user", (TextPart(TURN1),)), *done.result.messages[1:])
    second = await capture_events(desk, TURN2, session_id="golden-1", history=history)
    return [strip_ts(first), strip_ts(second)]


async def _replay(journal: Journal, model: GoldenModel) -> list[RunResult]:
    """Replay every recorded turn of the session through ``resume`` (the only replay path)."""
    desk = golden_desk(JournalRuntime(journal, strict=True), model)
    starts = await journal.read("golden-1", types=("run.start",))
    run_ids = list(dict.fromkeys(e.run_id for e in starts))
    assert len(run_ids) == 2
    return [await desk.resume("golden-1", run_id=rid) for rid in run_ids]


def _load_jsonl() -> list[Entry]:
    return [Entry.model_validate_json(line) for line in (CORPUS / "desk.jsonl").read_text().splitlines() if line]


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


async def _generate() -> None:
    if (CORPUS / "desk.db").exists() or (CORPUS / "desk.jsonl").exists():
        raise SystemExit(f"{CORPUS} already holds a corpus; a corpus is never regenerated")
    CORPUS.mkdir(parents=True, exist_ok=True)
    journal = SQLiteJournal(CORPUS / "desk.db")
    await _turns(JournalRuntime(journal), GoldenModel())
    lines = [e.body() for sid in await journal.sessions() for e in await journal.read(sid)]
    await journal.aclose()
    (CORPUS / "desk.jsonl").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    anyio.run(_generate)
