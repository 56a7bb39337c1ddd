"""The MCP ``ask`` tool holds runs to the HTTP server's concurrency limit, with the same mechanism.

``jeeves-router serve`` refuses a run over its ``--max-concurrency`` (64 by default) with 429; the
MCP server had no limit at all: a client could start any number of ``ask`` runs at once (65 calls
were 65 runs in flight). Now ``ask`` takes a slot of the same :class:`~jeeves_router._slots.Slots`
(the same default, the same ``max_concurrency`` argument and ``--max-concurrency`` flag), and a call
over the limit is an error result saying the server is busy and what to do; nothing runs for it.
"""

from __future__ import annotations

import inspect
import subprocess
import sys
from typing import Any

import anyio
import pytest

from jeeves_router import Agent
from jeeves_router._slots import DEFAULT_MAX_CONCURRENCY
from jeeves_router.journal import JournalRuntime, MemoryJournal
from jeeves_router.models.base import ModelRequest
from jeeves_router.testing import FunctionModel
from tests.mcp_helpers import ENV, ROOT, http_process

pytest.importorskip("mcp")
pytestmark = pytest.mark.usefixtures("no_process_left")  # conftest: no served desk outlives its test


def busy_text(limit: int) -> str:
    """The error result of an ``ask`` over the limit."""
    return (
        f"busy: the server is running its limit of {limit} concurrent runs; "
        "nothing was run: call again in a few seconds"
    )


class Held:
    """A model function whose calls wait (cancellably) on one event; counts the runs in flight."""

    def __init__(self) -> None:
        self.gate = anyio.Event()
        self.entered = 0
        self.in_flight = 0

    async def __call__(self, request: ModelRequest) -> str:
        self.entered += 1
        self.in_flight += 1
        try:
            await self.gate.wait()
            return "answered"
        finally:
            self.in_flight -= 1


def _desk(held: Held, *, journaled: bool = False) -> Agent:
    agent = Agent("Answer.", name="desk", model=FunctionModel(held))
    if journaled:
        agent.runtime = JournalRuntime(MemoryJournal())
    return agent


async def _flood(client: Any, calls: int, held: Held, meta: dict[str, str] | None = None) -> tuple[int, list[Any]]:
    """Make ``calls`` asks at once; once each is in its model or answered, the runs in flight and the answers."""
    answers: list[Any] = []
    async with anyio.create_task_group() as tg:

        async def ask() -> None:
            answers.append(await client.call_tool("ask", {"request": "hi"}, meta=meta))

        for _ in range(calls):
            tg.start_soon(ask)
        with anyio.fail_after(60):  # a hang guard
            while held.entered + len(answers) < calls:  # noqa: ASYNC110 - set by the runs, in this loop
                await anyio.sleep(0.01)
        peak = held.in_flight
        held.gate.set()
    return peak, answers


async def cancelled_once_running(client: Any, held: Held, meta: dict[str, str]) -> None:
    """Call ``ask`` with ``meta`` (its idempotency key) and cancel the call once its run is in the model."""
    with anyio.move_on_after(60) as waited, anyio.CancelScope() as call:  # a hang guard

        async def cancel_once_running() -> None:
            while not held.entered:  # noqa: ASYNC110 - set by the run, in this loop
                await anyio.sleep(0.01)
            call.cancel()

        async with anyio.create_task_group() as tg:
            tg.start_soon(cancel_once_running)
            await client.call_tool("ask", {"request": "hi"}, meta=meta)
    assert not waited.cancelled_caught, "the call's run never reached its model"


@pytest.mark.anyio
async def test_ask_holds_runs_to_the_http_servers_default_limit_and_refuses_one_more_as_busy() -> None:
    from mcp import Client

    from jeeves_router.mcp.server import router_server

    held = Held()
    async with Client(router_server(_desk(held))) as client:
        peak, answers = await _flood(client, DEFAULT_MAX_CONCURRENCY + 1, held)
        again = await client.call_tool("ask", {"request": "hi"})  # every slot was given back
    assert peak == DEFAULT_MAX_CONCURRENCY  # before: 65 runs in flight, none refused
    refused = [a for a in answers if a.is_error]
    assert [a.content[0].text for a in refused] == [busy_text(DEFAULT_MAX_CONCURRENCY)]
    assert refused[0].structured_content is None  # no run, no decision
    assert sum(a.content[0].text == "answered" for a in answers) == DEFAULT_MAX_CONCURRENCY
    assert not again.is_error and again.content[0].text == "answered"
    assert held.entered == DEFAULT_MAX_CONCURRENCY + 1


@pytest.mark.anyio
async def test_max_concurrency_sets_the_limit(caplog: pytest.LogCaptureFixture) -> None:
    from mcp import Client

    from jeeves_router.mcp.server import router_server

    held = Held()
    async with Client(router_server(_desk(held), max_concurrency=2)) as client:
        peak, answers = await _flood(client, 3, held)
    assert peak == 2 and held.entered == 2
    assert sorted(a.content[0].text for a in answers) == ["answered", "answered", busy_text(2)]
    refusals = [r for r in caplog.records if r.name == "jeeves_router._slots"]
    assert [(r.levelname, r.getMessage()) for r in refusals] == [("WARNING", "run.refused reason='busy' limit=2")]


@pytest.mark.anyio
async def test_a_keyed_run_whose_call_was_cancelled_keeps_its_slot_until_it_ends() -> None:
    from mcp import Client

    from jeeves_router.mcp.server import router_server

    held = Held()
    async with Client(router_server(_desk(held, journaled=True), max_concurrency=1)) as client:
        await cancelled_once_running(client, held, {"idempotency_key": "k-2"})
        assert held.in_flight == 1  # the keyed run goes on, for its retry
        with anyio.fail_after(60):  # a hang guard: a slot given back when the call ended lets this one run
            busy = await client.call_tool("ask", {"request": "another"})
        assert busy.is_error and busy.content[0].text == busy_text(1)
        held.gate.set()
        with anyio.fail_after(60):  # a hang guard
            while held.in_flight:  # noqa: ASYNC110 - set by the run, in this loop
                await anyio.sleep(0.01)
            while (free := await client.call_tool("ask", {"request": "another"})).is_error:
                assert free.content[0].text == busy_text(1)  # the slot is given back once the run's end is written
                await anyio.sleep(0.01)
    assert free.content[0].text == "answered"


@pytest.mark.anyio
async def test_the_same_key_asked_again_while_its_cancelled_call_runs_is_in_flight_then_answered_from_it() -> None:
    """A slot is free for the retry, so it reaches the key: told the run is in flight, then given its answer."""
    from mcp import Client

    from jeeves_router.mcp.server import router_server

    held, key = Held(), {"idempotency_key": "k-3"}
    async with Client(router_server(_desk(held, journaled=True), max_concurrency=2)) as client:
        await cancelled_once_running(client, held, key)
        assert held.in_flight == 1
        during = await client.call_tool("ask", {"request": "hi"}, meta=key)
        assert during.is_error and "still in flight; call again later for its answer" in during.content[0].text
        held.gate.set()
        with anyio.fail_after(60):  # a hang guard
            while (after := await client.call_tool("ask", {"request": "hi"}, meta=key)).is_error:
                assert "still in flight" in after.content[0].text  # until the run's end is written
                await anyio.sleep(0.01)
    assert after.content[0].text == "answered" and held.entered == 1  # the first run's answer, no second run


@pytest.mark.anyio
async def test_the_http_transport_refuses_a_run_over_max_concurrency_across_clients() -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    args = (*CLI, "tests.serve_apps:stuck_desk", "--transport", "http", "--port", "{port}", "--max-concurrency", "2")
    async with http_process(*args) as (_, port):
        url = f"http://127.0.0.1:{port}/mcp"
        refused: list[Any] = []
        async with anyio.create_task_group() as tg:

            async def ask() -> None:  # its own client (session) each: the limit is the server's
                async with httpx2.AsyncClient() as http, Client(streamable_http_client(url, http_client=http)) as c:
                    answer = await c.call_tool("ask", {"request": "refund please"})
                    refused.append(answer)
                    tg.cancel_scope.cancel()  # the others are stuck in their runs for good

            for _ in range(3):
                tg.start_soon(ask)
            with anyio.fail_after(120):  # a hang guard: before, every run was stuck and none refused
                await anyio.sleep_forever()
    (answer,) = refused
    assert answer.is_error and answer.content[0].text == busy_text(2)


CLI = ["-m", "jeeves_router.cli", "mcp"]


def test_the_mcp_front_takes_the_serve_fronts_argument_default_and_flag() -> None:
    from jeeves_router.cli._serve import mcp_command, serve_command
    from jeeves_router.mcp.server import main, router_server
    from jeeves_router.mcp.server import serve as mcp_serve
    from jeeves_router.serve.app import create_app

    for front in (create_app, mcp_serve, router_server, main):
        assert front.__kwdefaults__["max_concurrency"] == DEFAULT_MAX_CONCURRENCY == 64
    for command in (serve_command, mcp_command):
        assert inspect.signature(command).parameters["max_concurrency"].default == DEFAULT_MAX_CONCURRENCY


@pytest.mark.parametrize("value", ["0", "-3"])
def test_a_bad_max_concurrency_is_refused_in_one_line_before_serving(value: str) -> None:
    run = subprocess.run(
        [sys.executable, *CLI, "tests.mcp_servers.desk:desk", "--max-concurrency", value],
        capture_output=True,
        text=True,
        env=ENV,
        cwd=ROOT,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr == f"error: --max-concurrency must be a positive integer, got {value}\n"


def test_router_server_refuses_a_bad_max_concurrency() -> None:
    from jeeves_router.errors import UsageError
    from jeeves_router.mcp.server import router_server

    for bad in (0, True, 1.5, "2"):
        with pytest.raises(UsageError, match="max_concurrency must be a positive integer") as raised:
            router_server(_desk(Held()), max_concurrency=bad)  # type: ignore[arg-type]
        assert raised.value.argument == "max_concurrency"
