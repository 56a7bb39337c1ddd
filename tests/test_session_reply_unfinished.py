"""A session read's ``reply`` of a turn that failed or was cut is the text its client was sent.

``GET /v1/sessions/{id}`` rebuilds each turn's ``reply`` from the journaled events by the rule
of every front door (``ReplyText``). It said ``None`` for a turn without a result (``failed``,
``cut``), though a streaming client had been sent text before the run stopped. Now it is that
text, rebuilt by the same ``ReplyText`` from the turn's events; ``output`` stays ``None``.
Streams read by the real ``openai`` client on uvicorn.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2 as httpx
import openai
import pytest

from jeeves_router.serve import create_app
from jeeves_router.testing import Chunks, FunctionModel, Reply
from tests.serve_apps import desk_with, running
from tests.test_serve_client_gone_usage import GUARD_S, Cuts, FirstThenWaits, cuts, leave_mid_answer  # noqa: F401  (fixture)
from tests.test_serve_failed_before_text import FAILED

MESSAGES: Any = [{"role": "user", "content": "refund my order"}]


def drops_mid_answer(request: object) -> Reply:
    return Reply(Chunks("Refund ", "iss"), usage=FAILED, error=ConnectionResetError("connection reset"))


def test_a_turn_that_failed_mid_stream_shows_the_text_its_client_was_sent(tmp_path: Path) -> None:
    with running(create_app(desk_with(FunctionModel(drops_mid_answer)), journal=tmp_path / "runs.db")) as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)
        got = ""
        with pytest.raises(openai.APIError):
            for piece in client.chat.completions.create(
                model="desk", messages=MESSAGES, stream=True, extra_body={"session_id": "failed"}
            ):
                got += (piece.choices[0].delta.content or "") if piece.choices else ""
        turns = httpx.get(server.url + "/v1/sessions/failed").json()["turns"]
    assert got == "Refund iss"
    assert [(t["status"], t["reply"], t["output"]) for t in turns] == [("failed", got, None)]  # reply was None


def test_a_turn_cut_when_its_client_left_shows_the_text_its_client_was_sent(
    tmp_path: Path,
    cuts: Cuts,  # noqa: F811
) -> None:
    model = FirstThenWaits()
    got, turns = leave_mid_answer(create_app(desk_with(model), journal=tmp_path / "runs.db"), model, cuts, "cut")
    assert got == "first "
    assert [(t["status"], t["reply"], t["output"]) for t in turns] == [("cut", got, None)]  # reply was None
