"""A started stream a server shutdown cuts ends with an error that says what the run had spent.

Every other served failure's error carries ``error.usage`` (a completion's ``usage`` shape): a
500 before the first token, an error chunk mid-stream. The error that ends a started stream
when the shutdown's grace period is over (``Drain.cancel_all``) had none, though the server's
``run cut`` log line knew the figure. Now it carries that same figure, through the same error
(a failed run's, ``ServerShutdown``). Read by the real ``openai`` client on uvicorn; the run
event stream's ``error`` event says the same.
"""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator
from typing import Any

import httpx2 as httpx
import openai
import pytest

from jeeves_router.models.base import ModelRequest, ModelStreamItem
from jeeves_router.serve import create_app
from jeeves_router.serve.guard import Drain
from jeeves_router.serve.wire import usage_object
from jeeves_router.testing import CUT_USAGE, DEFAULT_USAGE
from tests.serve_apps import ServerThread, desk_with, running
from tests.test_serve_client_gone_usage import GUARD_S, Cuts, FirstThenWaits, cuts  # noqa: F401  (fixture)

SPENT = DEFAULT_USAGE + CUT_USAGE  # the classifier's request and the specialist's, which the cut left unanswered


def shut_down(server: ServerThread, drain: Drain) -> None:
    """The server's shutdown once its grace period is over: refuse new runs, cancel those in flight."""
    drain.start()
    server.server.servers[0].get_loop().call_soon_threadsafe(drain.cancel_all)


def test_a_stream_a_shutdown_cuts_ends_with_an_error_that_says_what_the_run_spent(
    cuts: Cuts,  # noqa: F811
) -> None:
    model, drain = FirstThenWaits(), Drain()
    messages: Any = [{"role": "user", "content": "refund my order"}]
    with running(create_app(desk_with(model), drain=drain)) as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)
        stream = client.chat.completions.create(
            model="desk", messages=messages, stream=True, extra_body={"session_id": "shut"}
        )
        got = ""
        with pytest.raises(openai.APIError) as info:
            for piece in stream:
                got += (piece.choices[0].delta.content or "") if piece.choices else ""
                if got == "first ":
                    shut_down(server, drain)
        assert model.cut.wait(GUARD_S) and cuts.seen.wait(GUARD_S)
    assert got == "first "
    error = info.value.body
    assert isinstance(error, dict) and error["code"] == "run_failed" and "ServerShutdown" in error["message"]
    assert error.get("usage") == usage_object(SPENT)  # was absent
    [record] = cuts.records  # the log line says the same spend
    assert (record.reason, record.input_tokens, record.output_tokens) == (  # type: ignore[attr-defined]
        "server_shutdown",
        SPENT.input_tokens,
        SPENT.output_tokens,
    )


def test_a_run_event_stream_a_shutdown_cuts_ends_with_an_error_event_that_says_what_the_run_spent(
    cuts: Cuts,  # noqa: F811
) -> None:
    model, drain = FirstThenWaits(), Drain()
    request = {"model": "desk", "input": "refund my order", "session_id": "shut-events"}
    with running(create_app(desk_with(model), drain=drain)) as server:
        with httpx.stream("POST", server.url + "/v1/runs", json=request) as r:
            frames, kind = [], ""
            for line in r.iter_lines():
                if line.startswith("event: "):
                    kind = line[7:]
                elif line.startswith("data: "):
                    frames.append((kind, json.loads(line[6:])))
                    if kind == "text.delta":
                        shut_down(server, drain)
        assert model.cut.wait(GUARD_S) and cuts.seen.wait(GUARD_S)
    (kind, last) = frames[-1]
    assert kind == "error" and last["error"]["code"] == "run_failed"
    assert last["error"].get("usage") == usage_object(SPENT)  # was absent


class StartsThenWaits(FirstThenWaits):
    """FirstThenWaits that says when its stream has started."""

    def __init__(self) -> None:
        super().__init__()
        self.started = threading.Event()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        self.started.set()
        async for item in super().stream(request):
            yield item


def test_a_whole_reply_a_shutdown_cuts_is_a_server_error_that_says_what_the_run_spent(
    cuts: Cuts,  # noqa: F811
) -> None:
    """Before its first byte (a whole reply), the cut run's 503 says its spend too, as a server error."""
    model, drain = StartsThenWaits(), Drain()
    messages: Any = [{"role": "user", "content": "refund my order"}]
    with running(create_app(desk_with(model), drain=drain)) as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)
        caught: list[BaseException] = []

        def ask() -> None:
            try:
                client.chat.completions.create(model="desk", messages=messages, extra_body={"session_id": "shut-w"})
            except BaseException as exc:  # looked at below
                caught.append(exc)

        asking = threading.Thread(target=ask)
        asking.start()
        assert model.started.wait(GUARD_S)
        shut_down(server, drain)
        asking.join(GUARD_S)
        assert model.cut.wait(GUARD_S) and cuts.seen.wait(GUARD_S)
    [error] = caught
    assert isinstance(error, openai.APIStatusError) and error.status_code == 503
    body = error.body
    assert isinstance(body, dict) and body["code"] == "shutting_down" and body["type"] == "server_error"
    assert body["message"] == "the server shut down before the run ended"
    assert body.get("usage") == usage_object(SPENT)  # was absent
