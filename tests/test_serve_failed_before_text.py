"""A served run that fails before its first token still tells its client what it spent.

The specialist's first request fails (the provider had reported tokens for it). Before its
first token the reply is no stream yet: whole or streamed, the client gets a 500 ``run_failed``
error, which said nothing of the requests the run had sent (the classifier's, the failed one),
while ``/v1/runs`` gave them in its ``run.failed`` events. The error now carries them as
``usage`` (a completion's usage shape), which the ``openai`` SDK gives as the error's body.
Read by the real ``openai`` client on uvicorn.

A router without recovery whose classifier failed (its adapter's retries spent) counted none of
the classifier's requests: the ``run.failed`` events and the exception's ``spent_usage`` said 0.
"""

from __future__ import annotations

import json
from typing import Any

import httpx2 as httpx
import openai
import pytest

from jeeves_router import Agent, Router, RouterRoute
from jeeves_router.models.openai import OpenAIModel
from jeeves_router.policies import RetryPolicy
from jeeves_router.serve import create_app
from jeeves_router.testing import DEFAULT_USAGE, Chunks, FunctionModel, RecordedSleeps, Reply
from jeeves_router.usage import Usage, spent_usage
from tests.loopback import FAKE_OPENAI_KEY, LoopbackServer, Status, loopback  # noqa: F401  (fixture)
from tests.serve_apps import desk_with, running

FAILED = Usage(input_tokens=50, output_tokens=0, requests=1)  # what the provider reported for the failed request
SPENT = DEFAULT_USAGE + FAILED  # the classifier's request and the specialist's failed one


def fails_at_once(request: object) -> Reply:
    return Reply(Chunks(), usage=FAILED, error=ConnectionResetError("connection reset"))


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_run_that_fails_before_its_first_token_says_what_it_spent_in_its_error(stream: bool) -> None:
    with running(create_app(desk_with(FunctionModel(fails_at_once)))) as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)
        messages: Any = [{"role": "user", "content": "refund my order"}]
        with pytest.raises(openai.InternalServerError) as info:
            if stream:
                for _ in client.chat.completions.create(
                    model="desk", messages=messages, stream=True, stream_options={"include_usage": True}
                ):
                    pass
            else:
                client.chat.completions.create(model="desk", messages=messages)
    error = info.value.body
    assert isinstance(error, dict) and error["code"] == "run_failed"
    assert "ConnectionResetError" in error["message"] and "connection reset" not in error["message"]
    assert error["usage"] == {  # was absent: the spend of the failed request was lost to the client
        "prompt_tokens": SPENT.input_tokens,
        "completion_tokens": SPENT.output_tokens,
        "total_tokens": SPENT.total_tokens,
    }


def test_the_run_events_of_the_same_failure_say_the_same_spend() -> None:
    with running(create_app(desk_with(FunctionModel(fails_at_once)))) as server:
        body = httpx.post(server.url + "/v1/runs", json={"model": "desk", "input": "refund my order"}).text
    failed = [
        json.loads(frame.split("data: ", 1)[1]) for frame in body.split("\n\n") if frame.startswith("event: run.failed")
    ]
    root = [f["usage"] for f in failed if f["path"] == ["desk"]]
    assert [(u["input_tokens"], u["output_tokens"], u["requests"]) for u in root] == [
        (SPENT.input_tokens, SPENT.output_tokens, SPENT.requests)
    ]


def test_an_error_chunk_after_the_first_token_says_what_the_run_spent_too() -> None:
    def drops_mid_answer(request: object) -> Reply:
        return Reply(Chunks("Refund ", "iss"), usage=FAILED, error=ConnectionResetError("connection reset"))

    with running(create_app(desk_with(FunctionModel(drops_mid_answer)))) as server:
        body = {"model": "desk", "messages": [{"role": "user", "content": "refund"}], "stream": True}
        text = httpx.post(server.url + "/v1/chat/completions", json=body).text
    errors = [json.loads(line[6:])["error"] for line in text.splitlines() if line.startswith('data: {"error"')]
    assert [e["usage"]["prompt_tokens"] for e in errors] == [SPENT.input_tokens]  # no include_usage: in the error


def failing_classifier_desk(server: LoopbackServer) -> Agent:
    """A router (no recovery, a fallback route) whose classifier's provider answers 503 to every request.

    The classifier's model builds its own client (on the loop of its first call): a served app closes it when it
    stops, a test that runs the desk itself closes it (``async with``).
    """
    server.responder = lambda req: Status(503)
    classifier = OpenAIModel(
        "gpt-4.1-mini",
        base_url=server.openai_base_url,
        api_key=FAKE_OPENAI_KEY,
        retry=RetryPolicy(max_attempts=2),
        sleep=RecordedSleeps(),
    )
    billing = Agent("Billing.", name="billing", model=FunctionModel(lambda r: "billing answer"))
    general = Agent("The rest.", name="general", model=FunctionModel(lambda r: "general answer"))
    routes = [RouterRoute("billing", billing, "payments"), RouterRoute("general", general, "the rest")]
    return Agent("Desk.", name="desk", model=classifier, architecture=Router(routes=routes, fallback_route="general"))


def test_a_classifier_that_failed_after_its_retries_counts_its_requests_in_the_served_run_failed() -> None:
    with LoopbackServer() as provider, running(create_app(failing_classifier_desk(provider))) as server:
        body = httpx.post(server.url + "/v1/runs", json={"model": "desk", "input": "refund my order"}).text
        whole = httpx.post(
            server.url + "/v1/chat/completions",
            json={"model": "desk", "messages": [{"role": "user", "content": "refund my order"}]},
        )
    failed = [json.loads(f.split("data: ", 1)[1]) for f in body.split("\n\n") if f.startswith("event: run.failed")]
    assert [(f["path"], f["error_type"], f["usage"]["requests"]) for f in failed] == [(["desk"], "ModelError", 2)]
    assert len(provider.requests) == 4  # the adapter's two attempts, for each request
    assert whole.status_code == 500 and whole.json()["error"]["usage"]["total_tokens"] == 0  # a 503 bills no token


@pytest.mark.anyio
async def test_the_exception_of_a_failed_classification_carries_its_requests(
    loopback: LoopbackServer,  # noqa: F811
) -> None:
    desk = failing_classifier_desk(loopback)
    assert isinstance(desk.model, OpenAIModel)
    async with desk.model:
        with pytest.raises(Exception) as info:
            await desk.run("refund my order")
    spent = spent_usage(info.value)
    assert spent is not None and spent.requests == 2  # was 0: the run's ledger never had them
