"""The MCP ``ask`` tool and the idempotency key a jeeves MCP client sends with each durable tool call.

The desk is :class:`tests.test_serve_idempotency.Desk` (one refund per run), called in process.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import anyio
import pytest

from jeeves_router.ids import keyed_run_id, keyed_session_id
from jeeves_router.journal import JournalRuntime, MemoryJournal
from jeeves_router.mcp import IDEMPOTENCY_META_KEY
from tests.test_serve_idempotency import ANSWER, Desk, _ask

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("key", ["s-1:run-1:3:0123456789abcdef", "k" * 300, "caf\u00e9:1", ""])
async def test_a_journaled_desk_answers_a_repeated_client_key_from_the_first_run(key: str) -> None:
    pytest.importorskip("mcp")
    desk = Desk()
    desk.agent.runtime = JournalRuntime(MemoryJournal())
    meta: dict[str, Any] = {IDEMPOTENCY_META_KEY: key}  # a too long or non-ASCII key is hashed, not refused
    first, again = await _ask(desk.agent, ("refund me please", meta), ("refund me please", meta))
    assert not first.is_error and not again.is_error
    assert first.content[0].text == again.content[0].text == ANSWER
    assert desk.refunds == ["INV-1"]


async def test_two_client_keys_are_two_runs_and_an_explicit_key_wins() -> None:
    pytest.importorskip("mcp")
    desk = Desk()
    desk.agent.runtime = JournalRuntime(MemoryJournal())
    long_a, long_b = "a" * 300, "a" * 299 + "b"  # mapped to two different keys
    both = {"idempotency_key": "order-50", IDEMPOTENCY_META_KEY: "client-1"}
    replies = await _ask(
        desk.agent,
        ("refund me please", {IDEMPOTENCY_META_KEY: long_a}),
        ("refund me please", {IDEMPOTENCY_META_KEY: long_b}),
        ("refund me please", both),
        ("refund me please", {"idempotency_key": "order-50"}),  # the explicit key named that run
    )
    assert [r.is_error for r in replies] == [False] * 4
    assert desk.refunds == ["INV-1"] * 3


async def test_a_desk_without_a_journal_ignores_the_client_key_and_answers() -> None:
    pytest.importorskip("mcp")
    desk = Desk()  # no runtime: the client's automatic key is not the user's request, so it is not refused
    (reply,) = await _ask(desk.agent, ("refund me please", {IDEMPOTENCY_META_KEY: "s-1:run-1:3:0123"}))
    assert not reply.is_error and reply.content[0].text == ANSWER
    assert desk.refunds == ["INV-1"]


async def test_the_mcp_ask_tool_logs_each_refused_key_in_one_info_line_as_http_does(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pytest.importorskip("mcp")
    from mcp import Client

    from jeeves_router.mcp.server import router_server

    caplog.set_level(logging.INFO, logger="jeeves_router.serve")
    journal, refunds, gate = MemoryJournal(), [], threading.Event()
    desk = Desk(refunds, tool_gate=gate)
    desk.agent.runtime = JournalRuntime(journal)
    key = {"idempotency_key": "order-60"}
    async with Client(router_server(desk.agent)) as client, anyio.create_task_group() as tg:
        tg.start_soon(lambda: client.call_tool("ask", {"request": "refund me please"}, meta=key))
        with anyio.fail_after(30):  # a hang guard
            while not desk.started.is_set():  # noqa: ASYNC110 - set by the tool, in this loop
                await anyio.sleep(0.01)
        busy = await client.call_tool("ask", {"request": "refund me please"}, meta=key)
        gate.set()
    (conflict,) = await _ask(desk.agent, ("refund me twice, card 4242", key))
    changed = Desk(refunds, instructions="You refund, politely.")
    changed.agent.runtime = JournalRuntime(journal)
    (diverged,) = await _ask(changed.agent, ("refund me please", key))
    assert busy.is_error and conflict.is_error and diverged.is_error
    assert "changed since" in diverged.content[0].text and refunds == ["INV-1"]
    sid = keyed_session_id("order-60")
    refused = [r for r in caplog.records if r.getMessage().startswith("idempotency key refused")]
    fields = [r.fields for r in refused]  # type: ignore[attr-defined]
    assert [(r.name, r.levelno) for r in refused] == [("jeeves_router.serve", logging.INFO)] * 3
    assert [(f["reason"], f["tool"], f["run_id"]) for f in fields] == [
        (reason, "ask", keyed_run_id(sid, "order-60")) for reason in ("in_flight", "conflict", "replay_diverged")
    ]
    assert [f["session_id"] for f in fields[:2]] == [sid, sid]
    assert fields[2]["session_id"].startswith(sid)  # the diverged step's session: the specialist's, under it
    for secret in ("card 4242", "refund me", "order-60"):
        assert secret not in caplog.text
