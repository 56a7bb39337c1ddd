"""A ``LlamaCppModel`` request cut off mid-answer reports what it spent, as the provider adapters' retrier does.

A cancellation (a run's time limit, a server shutting down) or a consumer leaving the stream
mid-answer (``break`` out of a run's stream) raises no error of the model's own to carry
``spent_usage``: the request reports its usage to the scope that cut it
(:func:`~jeeves_router.usage.spent_when_cut`), which the run counts (``RunStream.spent``,
a journaled run's ``run.end``). The model runs on this machine: the prompt it evaluated and
the tokens it generated so far, at no cost. A request answered in full reports nothing there.
"""

from __future__ import annotations

import threading
from typing import Any

import anyio
import anyio.to_thread
import pytest

from jeeves_router import Agent
from jeeves_router._aio import aclosing
from jeeves_router.events import TextDelta
from jeeves_router.messages import user
from jeeves_router.models.base import ModelRequest, ModelTextDelta
from jeeves_router.usage import Usage, cut_requests
from tests.llama_stub import GUARD_S, StubLlama

pytestmark = pytest.mark.anyio
REQUEST = ModelRequest(messages=(user("hi"),))


def llama_model(stub: StubLlama) -> Any:
    pytest.importorskip("llama_cpp")
    from jeeves_router.models.llamacpp import LlamaCppModel

    return LlamaCppModel("stub.gguf", llama=stub)


def spent(stub: StubLlama, text: str) -> Usage:
    """The usage of the stub's one request, having generated ``text`` (a token a byte, no cost)."""
    [prompt] = stub.prompts
    return Usage(input_tokens=len(prompt), output_tokens=len(text.encode()), requests=1, cost_usd=0.0)


async def test_a_stream_left_mid_answer_reports_the_request_to_the_scope_that_cut_it() -> None:
    stub = StubLlama()
    model = llama_model(stub)
    with anyio.fail_after(GUARD_S), cut_requests() as cut_off:
        async with aclosing(model.stream(REQUEST)) as items:
            async for item in items:
                assert isinstance(item, ModelTextDelta) and item.text == "hello"
                break
    assert cut_off == [spent(stub, "hello")]


async def test_a_request_cancelled_waiting_for_its_next_token_reports_what_it_spent() -> None:
    gate = threading.Event()
    stub = StubLlama(gate)
    model = llama_model(stub)
    with anyio.fail_after(GUARD_S), cut_requests() as cut_off:
        async with anyio.create_task_group() as tg:

            async def cut_once_it_generates() -> None:
                await anyio.to_thread.run_sync(stub.generating.wait, GUARD_S)
                tg.cancel_scope.cancel()  # the request waits for its first token
                gate.set()

            tg.start_soon(cut_once_it_generates)
            await model.request(REQUEST)
    # the token being generated when the cancellation came is finished (llama.cpp is not interrupted
    # mid-token), and counts; the cancellation then lands at the wait for the next one
    assert cut_off == [spent(stub, "hello")]


async def test_a_request_answered_in_full_reports_nothing_as_cut() -> None:
    stub = StubLlama()
    model = llama_model(stub)
    with anyio.fail_after(GUARD_S), cut_requests() as cut_off:
        response = await model.request(REQUEST)
    assert (response.text, response.usage) == ("hello world", spent(stub, "hello world"))
    assert cut_off == []


async def test_a_run_left_mid_answer_counts_the_local_request_in_its_spend() -> None:
    stub = StubLlama()
    agent = Agent("You answer.", name="local", model=llama_model(stub))
    with anyio.fail_after(GUARD_S):
        stream = agent.stream("hi")
        async with stream:
            async for event in stream:
                if isinstance(event, TextDelta):
                    break
    assert stream.spent == spent(stub, "hello")
