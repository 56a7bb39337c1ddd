"""Every front door refuses a key it cannot honour with the advice of the agent's own runtime.

A plain agent is told to give it a journal (how depends on the front door: ``--journal`` for a
server, ``JournalRuntime`` in code); a DBOS agent is told what DBOS offers instead (workflow ids),
never to add the journal that ``create_app(journal=...)`` then refuses for it.
"""

from __future__ import annotations

from typing import Any

import pytest

from jeeves_router import Agent
from jeeves_router.durable.dbos import DBOSRuntime
from jeeves_router.errors import UsageError
from jeeves_router.journal import MemoryJournal
from jeeves_router.runtime import Runtime
from jeeves_router.serve import create_app
from jeeves_router.testing import FunctionModel

CHAT = "/v1/chat/completions"
DBOS_ADVICE = "workflow_id=key"


def _agent(runtime: Runtime | None) -> tuple[Agent, list[str]]:
    asked: list[str] = []

    def answer(request: Any) -> str:
        asked.append("model")
        return "hello"

    return Agent("Desk.", name="desk", model=FunctionModel(answer), runtime=runtime), asked


def _served(runtime: Runtime | None, *, stream: bool) -> tuple[int, dict[str, Any], list[str]]:
    from starlette.testclient import TestClient

    agent, asked = _agent(runtime)
    body: dict[str, Any] = {"model": "desk", "messages": [{"role": "user", "content": "hi"}], "stream": stream}
    with TestClient(create_app(agent)) as client:
        reply = client.post(CHAT, json=body, headers={"Idempotency-Key": "order-1"})
    return reply.status_code, reply.json()["error"], asked


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_serve_tells_a_dbos_agent_to_use_workflow_ids_not_a_journal(stream: bool) -> None:
    status, error, asked = _served(DBOSRuntime(), stream=stream)
    assert status == 400 and error["param"] == "Idempotency-Key"
    assert DBOS_ADVICE in error["message"] and "DBOSRuntime" in error["message"]
    assert "--journal" not in error["message"] and "journal=" not in error["message"]
    assert asked == []


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_serve_tells_a_plain_agent_to_start_the_server_with_a_journal(stream: bool) -> None:
    status, error, asked = _served(None, stream=stream)
    assert status == 400 and error["code"] == "idempotency_key_needs_journal"
    assert "--journal" in error["message"] and "create_app(journal=...)" in error["message"]
    assert DBOS_ADVICE not in error["message"]
    assert asked == []


def test_the_advice_serve_gives_a_plain_agent_is_followed_by_create_app() -> None:
    """The circle closed: what the 400 says to do starts, and then the key is honoured."""
    from starlette.testclient import TestClient

    agent, asked = _agent(None)
    body = {"model": "desk", "messages": [{"role": "user", "content": "hi"}]}
    with TestClient(create_app(agent, journal=MemoryJournal())) as client:
        replies = [client.post(CHAT, json=body, headers={"Idempotency-Key": "order-1"}) for _ in range(2)]
    assert [r.status_code for r in replies] == [200, 200] and asked == ["model"]


def test_create_app_refuses_a_journal_for_a_dbos_agent_and_the_refusal_key_advice_needs_none() -> None:
    agent, _ = _agent(DBOSRuntime())
    with pytest.raises(UsageError, match="serve it without a journal"):
        create_app(agent, journal=MemoryJournal())


async def _mcp_ask(runtime: Runtime | None) -> tuple[Any, list[str]]:
    from mcp import Client

    from jeeves_router.mcp.server import router_server

    agent, asked = _agent(runtime)
    async with Client(router_server(agent)) as client:
        result = await client.call_tool("ask", {"request": "hi"}, meta={"idempotency_key": "order-1"})
    return result, asked


@pytest.mark.anyio
async def test_mcp_ask_tells_a_dbos_agent_to_use_workflow_ids_not_a_journal() -> None:
    pytest.importorskip("mcp")
    result, asked = await _mcp_ask(DBOSRuntime())
    text = result.content[0].text
    assert result.is_error and DBOS_ADVICE in text and "DBOSRuntime" in text
    assert "JournalRuntime" not in text and "--journal" not in text
    assert "nothing was run" in text and asked == []


@pytest.mark.anyio
async def test_mcp_ask_tells_a_plain_agent_to_start_the_server_with_a_journal() -> None:
    pytest.importorskip("mcp")
    result, asked = await _mcp_ask(None)
    text = result.content[0].text
    assert result.is_error and "--journal" in text and DBOS_ADVICE not in text
    assert "nothing was run" in text and asked == []


@pytest.mark.anyio
@pytest.mark.parametrize("dbos", [True, False], ids=["dbos", "plain"])
async def test_agent_run_gives_the_runtime_advice_for_code(dbos: bool) -> None:
    agent, asked = _agent(DBOSRuntime() if dbos else None)
    with pytest.raises(UsageError) as refused:
        await agent.run("hi", idempotency_key="order-1")
    text = str(refused.value)
    assert ("workflow_id=key" in text) is dbos
    assert ("runtime=JournalRuntime(SQLiteJournal(path))" in text) is not dbos
    assert "--journal" not in text and asked == []
