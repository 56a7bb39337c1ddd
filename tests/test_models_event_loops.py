"""A model adapter's HTTP client lives and dies with the event loop that built it.

Its pooled connections belong to that loop. The adapter closes the client when the loop shuts
down (``asyncio.run`` finalises the loop's async generators) and builds a new one on another
loop, so an agent used by two ``asyncio.run`` calls in turn works in both, and a script that
never closes its models leaves no connection open. The server here is our own served desk on
uvicorn, which keeps connections alive between requests as providers do.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import warnings
from collections.abc import Iterator

import pytest

from jeeves_router import Agent
from jeeves_router.journal import MemoryJournal
from jeeves_router.models.openai import OpenAIModel
from jeeves_router.serve import create_app
from tests.serve_apps import ServerThread, build_desk, running
from tests.task_helpers import warnings_of_this_test

ANSWER = "[billing] Happy to help (I see 0 earlier messages)."


@pytest.fixture(scope="module")
def served() -> Iterator[ServerThread]:
    with running(create_app(build_desk(), journal=MemoryJournal())) as server:
        yield server


def relay(server: ServerThread) -> tuple[Agent, OpenAIModel]:
    """An agent whose model is an OpenAI adapter (it builds its own client) pointed at the served desk."""
    model = OpenAIModel("desk", base_url=server.url + "/v1", api_key="unused")
    return Agent("You pass it on.", name="relay", model=model), model


def resource_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]


def test_an_agent_run_by_two_asyncio_runs_in_turn_answers_in_both(served: ServerThread) -> None:
    agent, model = relay(served)
    with warnings_of_this_test() as caught:
        first = asyncio.run(agent.run("refund me"))
        second = asyncio.run(agent.run("refund me"))  # the first loop's connection is gone with it
        asyncio.run(model.aclose())
        del agent, model
        gc.collect()
    assert (first.status, first.output) == ("ok", ANSWER)
    assert (second.status, second.output) == ("ok", ANSWER)
    assert resource_warnings(caught) == []


def test_a_script_that_never_closes_its_model_leaves_no_connection_open(served: ServerThread) -> None:
    agent, model = relay(served)
    with warnings_of_this_test() as caught:
        result = asyncio.run(agent.run("refund me"))
        del agent, model  # never closed: the loop's shutdown closed its client
        gc.collect()
    assert (result.status, result.output) == ("ok", ANSWER)
    assert resource_warnings(caught) == []


def test_a_client_passed_in_is_left_to_its_owner_on_every_loop(served: ServerThread) -> None:
    import openai

    async def run_twice() -> list[str | None]:
        async with openai.AsyncOpenAI(base_url=served.url + "/v1", api_key="unused") as client:
            model = OpenAIModel("desk", client=client)
            agent = Agent("You pass it on.", name="relay", model=model)
            outputs = [(await agent.run("refund me")).output for _ in range(2)]
            await model.aclose()  # not ours: stays open
            assert not client.is_closed()
            outputs.append((await agent.run("refund me")).output)
            return outputs

    assert asyncio.run(run_twice()) == [ANSWER] * 3


def test_an_agent_run_by_two_threads_each_on_its_own_loop_answers_in_both() -> None:
    # a slow desk (its classifier waits 0.3 s), so both threads' requests are in flight at once:
    # each loop's client is its own, and one thread's new client does not close the other's
    with running(create_app(build_desk(latency_s=0.3), journal=MemoryJournal())) as server:
        held = [relay(server)[0]]  # the one agent both threads run
        started = threading.Barrier(2)
        outputs: dict[int, object] = {}

        def worker(n: int) -> None:
            async def main() -> None:
                started.wait(timeout=30)  # both loops are running before either calls the model
                try:
                    outputs[n] = (await held[0].run("refund me")).output
                except Exception as exc:
                    outputs[n] = exc

            asyncio.run(main())

        with warnings_of_this_test() as caught:
            threads = [threading.Thread(target=worker, args=(n,)) for n in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=60)
            held.clear()  # never closed: each loop's shutdown closed its client
            gc.collect()
    assert outputs == {0: ANSWER, 1: ANSWER}
    assert resource_warnings(caught) == []
