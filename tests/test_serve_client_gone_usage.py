"""A streamed chat reply its client abandons: the run is recorded as cut, and what it spent is told.

The client (the real ``openai`` client on uvicorn) reads the first token and closes the
stream. The server cancels the run; the journal records it as ``cut`` (the session read shows
it), but what the run had spent — the classifier's request, and the specialist's request the
cancellation cut off while it waited for its answer (sent: it counts) — was recorded nowhere.
The server now logs one INFO line for a run it cut, on ``jeeves_router.serve``, with that spend.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
import openai
import pytest

from jeeves_router.models.base import ModelRequest, ModelResponse, ModelStreamItem, ModelTextDelta
from jeeves_router.serve import create_app
from jeeves_router.testing import CUT_USAGE, DEFAULT_USAGE
from jeeves_router.usage import spent_when_cut
from tests.serve_apps import desk_with, running

GUARD_S = 60.0  # only so that a regression fails instead of hanging the suite


class FirstThenWaits:
    """Streams a first token, then waits for the rest; a cut-off request reports itself, as an adapter does."""

    name = "test:first-then-waits"

    def __init__(self) -> None:
        self.cut = threading.Event()

    async def request(self, request: ModelRequest) -> ModelResponse:  # pragma: no cover - streamed only
        raise NotImplementedError

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        yield ModelTextDelta("first ")
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            spent_when_cut(CUT_USAGE)  # sent, its answer never read
            self.cut.set()
            raise
        raise AssertionError("unreachable")


class Cuts(logging.Handler):
    """The records of runs the server cut."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.records: list[logging.LogRecord] = []
        self.seen = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("run cut"):
            self.records.append(record)
            self.seen.set()


@pytest.fixture
def cuts() -> Iterator[Cuts]:
    handler = Cuts()
    logger = logging.getLogger("jeeves_router.serve")
    before = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(before)


def leave_mid_answer(app: Any, model: FirstThenWaits, cuts: Cuts, session_id: str) -> tuple[str, list[dict[str, Any]]]:
    """Stream a chat reply from ``app`` through the openai client, leave at its first text, wait for the cut.

    Returns the text the client got and the session's turns read back (``GET /v1/sessions/{id}``).
    """
    messages: Any = [{"role": "user", "content": "refund my order"}]
    with running(app) as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)
        stream = client.chat.completions.create(
            model="desk", messages=messages, stream=True, extra_body={"session_id": session_id}
        )
        got = ""
        for piece in stream:
            got += (piece.choices[0].delta.content or "") if piece.choices else ""
            if got:
                break
        stream.close()  # the client goes away mid-answer
        assert model.cut.wait(GUARD_S) and cuts.seen.wait(GUARD_S)  # logged once the run is closed
        turns: list[dict[str, Any]] = httpx.get(f"{server.url}/v1/sessions/{session_id}").json()["turns"]
    return got, turns


def test_a_stream_its_client_abandons_is_recorded_cut_with_what_it_spent(tmp_path: Path, cuts: Cuts) -> None:
    model = FirstThenWaits()
    got, turns = leave_mid_answer(create_app(desk_with(model), journal=tmp_path / "runs.db"), model, cuts, "gone")
    assert got == "first "
    assert [(t["status"], t["route"], t["output"]) for t in turns] == [("cut", "billing", None)]
    [record] = cuts.records
    spent = DEFAULT_USAGE + CUT_USAGE  # the classifier's request and the one the cut left unanswered
    told = {k: getattr(record, k, "absent") for k in ("reason", "session_id", "input_tokens", "requests", "cost_usd")}
    assert told == {
        "reason": "client_disconnected",
        "session_id": "gone",
        "input_tokens": spent.input_tokens,
        "requests": spent.requests,
        "cost_usd": None,  # a request cut off has an unknown cost
    }


def test_a_run_event_stream_its_client_abandons_is_logged_cut_with_what_it_spent(cuts: Cuts) -> None:
    model = FirstThenWaits()
    request = {"model": "desk", "input": "refund my order", "session_id": "gone-events"}
    with running(create_app(desk_with(model))) as server:
        with httpx.stream("POST", server.url + "/v1/runs", json=request) as r:
            for line in r.iter_lines():
                if line == "event: text.delta":
                    break
        assert model.cut.wait(GUARD_S) and cuts.seen.wait(GUARD_S)
    [record] = cuts.records
    assert (record.session_id, record.requests) == ("gone-events", (DEFAULT_USAGE + CUT_USAGE).requests)  # type: ignore[attr-defined]
