"""The MCP ``ask`` tool and the idempotency key a jeeves MCP client sends with each durable tool call.

The desk is :class:`tests.test_serve_idempotency.Desk` (one refund per run), called in process.
"""

from __future__ import annotations

from typing import Any

import pytest

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
