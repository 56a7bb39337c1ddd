"""A run that recovery stopped (``critical``) answers with its report's message for the end user.

Over the OpenAI wire (whole and streamed, read by the real ``openai`` client) and over MCP, a
run without an output used to answer ``content: null``; a client that shows the content showed
nothing. The report's ``user_message`` is the one part of a report meant for end users, so it
is what these runs answer; ``jeeves.status`` still says ``critical``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2 as httpx
import openai
import pytest

from jeeves_router import Agent, Recovery
from jeeves_router.models.base import ModelRequest, ModelStreamItem, ModelTextDelta
from jeeves_router.results import RunResult
from jeeves_router.serve import create_app
from jeeves_router.serve.reply import ReplyText
from jeeves_router.serve.wire import completion
from jeeves_router.testing import FunctionModel, RecordedSleeps
from tests.serve_apps import desk_with, running

SECRET = "db-secret-host:5432"
TIMEOUT_MESSAGE = "A service I depend on is not responding right now. Please try again in a few minutes."


class TextThenFail:
    """Streams a first piece of text, then the connection drops."""

    name = "test:text-then-fail"

    async def request(self, request: ModelRequest) -> Any:  # pragma: no cover - streamed only
        raise NotImplementedError

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        yield ModelTextDelta("Checking your ")
        raise TimeoutError(SECRET)


def times_out(request: ModelRequest) -> str:
    raise TimeoutError(SECRET)


def desk(billing_model: Any) -> Agent:
    return desk_with(billing_model, recovery=Recovery(sleep=RecordedSleeps()))


def ask(url: str, *, stream: bool) -> tuple[str | None, str | None, dict[str, Any]]:
    """(content, finish_reason, jeeves) of one chat completion, read by the openai client."""
    client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)
    messages: Any = [{"role": "user", "content": "refund my order"}]
    if not stream:
        whole = client.chat.completions.create(model="desk", messages=messages)
        assert whole.model_extra is not None
        return whole.choices[0].message.content, whole.choices[0].finish_reason, whole.model_extra["jeeves"]
    text, finish, jeeves = "", None, {}
    for piece in client.chat.completions.create(model="desk", messages=messages, stream=True):
        if piece.choices:
            text += piece.choices[0].delta.content or ""
            finish = piece.choices[0].finish_reason or finish
        jeeves = (piece.model_extra or {}).get("jeeves") or jeeves
    return text, finish, jeeves


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_critical_run_before_any_text_answers_its_user_message(stream: bool) -> None:
    with running(create_app(desk(FunctionModel(times_out, name="billing")))) as server:
        content, finish, jeeves = ask(server.url, stream=stream)
    assert content == TIMEOUT_MESSAGE and SECRET not in content
    assert finish == "stop" and jeeves["status"] == "critical" and jeeves["route"] == "billing"


def test_a_critical_run_whose_text_had_started_ends_with_its_user_message() -> None:
    with running(create_app(desk(TextThenFail()))) as server:
        content, finish, jeeves = ask(server.url, stream=True)
        whole, _, whole_jeeves = ask(server.url, stream=False)
    assert content is not None and content.startswith("Checking your \n\n")
    message = content.removeprefix("Checking your \n\n")
    assert message and SECRET not in message and content.count(message) == 1
    assert finish == "stop" and jeeves["status"] == "critical"
    assert whole == content and whole_jeeves["status"] == "critical"  # whole: what the stream said (was: no fragment)


@pytest.mark.parametrize(
    ("result", "content"),
    [
        (RunResult(output=None, status="unresolved", session_id="s"), None),
        (RunResult(output=None, status="critical", session_id="s", report={"user_message": 7}), None),
        (RunResult(output="done", status="ok", session_id="s", report={"user_message": "ignored"}), "done"),
        (RunResult(output="", status="ok", session_id="s"), ""),
    ],
    ids=["unresolved", "not-a-message", "output-over-message", "empty-output"],
)
def test_a_run_without_text_an_output_or_a_report_still_answers_null(result: RunResult, content: str | None) -> None:
    reply = ReplyText()  # no text streamed
    assert reply.end(result) == (content or "") and reply.text == content
    assert completion("desk", result, reply.text)["choices"][0]["message"]["content"] == content


@pytest.mark.anyio
async def test_the_mcp_ask_tool_names_the_user_message_of_a_critical_run() -> None:
    pytest.importorskip("mcp")
    from mcp import Client

    from jeeves_router.mcp.server import router_server

    async with Client(router_server(desk(FunctionModel(times_out, name="billing")))) as client:
        res = await client.call_tool("ask", {"request": "refund my order"})
    assert res.is_error
    assert res.content[0].text == f"no answer (status: critical): {TIMEOUT_MESSAGE}"  # type: ignore[union-attr]
    assert res.structured_content is not None
    assert res.structured_content["user_message"] == TIMEOUT_MESSAGE and res.structured_content["output"] is None


def test_a_keyed_critical_run_replays_the_same_message_and_runs_nothing_again(tmp_path: Path) -> None:
    calls: list[str] = []

    def times_out_counted(request: ModelRequest) -> str:
        calls.append("billing")
        raise TimeoutError(SECRET)

    app = create_app(desk(FunctionModel(times_out_counted, name="billing")), journal=tmp_path / "runs.db")
    body = {"model": "desk", "messages": [{"role": "user", "content": "refund my order"}]}
    headers = {"Idempotency-Key": "k-critical"}
    with running(app) as server:
        first = httpx.post(server.url + "/v1/chat/completions", json=body, headers=headers)
        tried = len(calls)
        again = httpx.post(server.url + "/v1/chat/completions", json=body, headers=headers)
        streamed = httpx.post(server.url + "/v1/chat/completions", json={**body, "stream": True}, headers=headers)
    assert first.status_code == again.status_code == 200 and tried >= 1
    assert len(calls) == tried  # the replays ran nothing
    assert again.headers["idempotent-replayed"] == "true"
    content = first.json()["choices"][0]["message"]["content"]
    assert content == TIMEOUT_MESSAGE == again.json()["choices"][0]["message"]["content"]
    assert again.json()["jeeves"]["status"] == "critical"
    chunks = [json.loads(line[6:]) for line in streamed.text.splitlines() if line.startswith("data: {")]
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]) == TIMEOUT_MESSAGE
