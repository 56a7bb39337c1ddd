"""A run that started and ended in a 5xx is not run again behind the caller's back.

The openai SDK retries any 5xx twice by default, so a failed run (which may have refunded
before it raised) ran three times for one ``create()``. Such a reply says
``X-Should-Retry: false``, which the SDK obeys; a request with an ``Idempotency-Key`` is left to
the SDK's default, since its retry resumes the run from the journal instead of running it again.
"""

from __future__ import annotations

from typing import Any

import anyio
import httpx2 as httpx
import openai
import pytest

from jeeves_router.models.base import ModelRequest
from jeeves_router.serve import create_app
from jeeves_router.serve.guard import Drain
from jeeves_router.serve.runs import RunReply
from jeeves_router.testing import FunctionModel
from tests.serve_apps import desk_with, running
from tests.test_serve_recovery_answer import desk, times_out

CHAT = "/v1/chat/completions"
MESSAGES: Any = [{"role": "user", "content": "refund my order"}]


class Broken:
    """A specialist model that raises, counting its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, request: ModelRequest) -> str:
        self.calls += 1
        raise RuntimeError("the provider went away")


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_the_openai_client_does_not_run_a_failed_run_again(stream: bool) -> None:
    broken = Broken()
    with running(create_app(desk_with(FunctionModel(broken, name="billing")))) as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused")  # the default: 2 retries
        with pytest.raises(openai.InternalServerError) as caught:
            client.chat.completions.create(model="desk", messages=MESSAGES, stream=stream)
    assert broken.calls == 1  # was 3: the first run and two retries
    assert caught.value.response.headers["x-should-retry"] == "false"
    assert caught.value.body == {"message": "the run failed (RuntimeError); see the server log",
                                 "type": "server_error", "param": None, "code": "run_failed",
                                 "usage": {"prompt_tokens": 10, "completion_tokens": 5,
                                           "total_tokens": 15}}  # fmt: skip  # the classifier's request


def test_a_keyed_failed_run_leaves_the_retry_to_the_client_and_answers_are_unmarked(tmp_path: Any) -> None:
    broken = Broken()
    app = create_app(desk_with(FunctionModel(broken, name="billing")), journal=tmp_path / "runs.db")
    request = {"model": "desk", "messages": MESSAGES}
    with running(app) as server:
        plain = httpx.post(server.url + CHAT, json=request)
        keyed = httpx.post(server.url + CHAT, json=request, headers={"Idempotency-Key": "k-1"})
    assert plain.status_code == keyed.status_code == 500
    assert plain.headers["x-should-retry"] == "false" and "x-should-retry" not in keyed.headers
    with running(create_app(desk(FunctionModel(times_out, name="billing")))) as server:
        critical = httpx.post(server.url + CHAT, json=request)  # recovery stopped it: an answer, not an error
    assert critical.status_code == 200 and "x-should-retry" not in critical.headers
    assert critical.json()["jeeves"]["status"] == "critical"


@pytest.mark.anyio
@pytest.mark.parametrize("keyed", [False, True], ids=["plain", "keyed"])
async def test_a_run_cut_by_a_shutdown_before_its_reply_started_says_whether_to_retry(keyed: bool) -> None:
    drain, started, released = Drain(), anyio.Event(), []
    sent: list[dict[str, Any]] = []

    async def produce(send: Any) -> None:
        started.set()
        await anyio.sleep_forever()  # a run that has not answered yet

    async def receive() -> dict[str, Any]:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    reply = RunReply(produce, lambda: released.append(1), drain, b"", keyed=keyed)
    async with anyio.create_task_group() as tg:
        tg.start_soon(reply, {"type": "http"}, receive, send)
        await started.wait()
        drain.cancel_all()
    assert sent[0]["status"] == 503 and released == [1]
    headers = dict(sent[0]["headers"])
    assert headers.get(b"x-should-retry") == (None if keyed else b"false")


@pytest.mark.anyio
async def test_an_agent_on_a_served_desk_does_not_run_its_failed_run_again() -> None:
    # Our own adapter has the SDK's retries off; its retries and the recovery ladder read the header.
    from jeeves_router import Agent, Recovery
    from jeeves_router.architectures.react import ToolLoop
    from jeeves_router.models.openai import OpenAIModel
    from jeeves_router.testing import RecordedSleeps

    broken = Broken()
    with running(create_app(desk_with(FunctionModel(broken, name="billing")))) as server:
        async with OpenAIModel("desk", base_url=server.url + "/v1", api_key="unused") as remote:
            ladder = ToolLoop(recovery=Recovery(sleep=RecordedSleeps()))
            caller = Agent("Ask the desk.", name="caller", model=remote, architecture=ladder)
            result = await caller.run("refund my order")
    assert broken.calls == 1  # was 3 under the adapter's retries, more under the ladder's
    assert result.status == "critical" and result.report is not None
