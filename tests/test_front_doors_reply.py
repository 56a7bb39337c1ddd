"""One reply for one run, whichever front door asked: the HTTP chat endpoint, the MCP ``ask`` tool, a session read.

The MCP server answered with ``RunResult.output`` (the answering agent's last reply) while
the HTTP server, for the same desk and request, answered with the text of the whole run
(:class:`~jeeves_router.reply.ReplyText`): after a handoff whose first agent wrote a sentence,
or a tool loop that wrote before its tool call, the two front doors said different things.
Now the MCP text content (and its structured ``reply``) is the HTTP reply's text, and a session
read over HTTP shows each turn's ``reply`` by the same rule, rebuilt from the journaled events,
next to its ``output`` (what later turns are given as the assistant's message).

Also here: a ``force_route`` naming a handoff target (no route) is refused with a message saying so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from jeeves_router import Agent
from jeeves_router.serve import create_app
from jeeves_router.testing import FunctionModel
from tests.serve_apps import running
from tests.test_serve_reply_text import PASSING_ON, REFUNDED, ask, balance, handing_off_desk, looks_up

pytest.importorskip("mcp")

HANDED_ON = f"{PASSING_ON}\n\n{REFUNDED}"
LOOKED_UP = "Let me look that up.\n\nYour balance is 5 EUR."


def teller() -> Agent:
    return Agent("Answer balances.", name="teller", model=FunctionModel(looks_up), tools=[balance])


async def mcp_ask(agent: Agent, request: str = "refund my order") -> tuple[str, dict[str, Any]]:
    """(text content, structured content) of one ``ask`` through an MCP client."""
    from mcp import Client

    from jeeves_router.mcp.server import router_server

    async with Client(router_server(agent)) as client:
        res = await client.call_tool("ask", {"request": request})
    assert not res.is_error and res.structured_content is not None
    return res.content[0].text, res.structured_content  # type: ignore[union-attr]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("build", "model", "said", "output"),
    [(handing_off_desk, "desk", HANDED_ON, REFUNDED), (teller, "teller", LOOKED_UP, "Your balance is 5 EUR.")],
    ids=["handoff", "tool-loop"],
)
async def test_the_mcp_ask_tool_says_what_the_http_chat_reply_says(
    build: Any, model: str, said: str, output: str
) -> None:
    text, structured = await mcp_ask(build())
    with running(create_app(build())) as server:
        over_http, _ = ask(server.url, stream=False, model=model)
    assert text == over_http == said  # MCP said only the answering agent's output
    assert structured["reply"] == said and structured["output"] == output


def test_a_session_read_shows_each_turns_reply_as_the_chat_reply_said_it(tmp_path: Path) -> None:
    body = {"model": "desk", "messages": [{"role": "user", "content": "refund my order"}], "session_id": "s-1"}
    with running(create_app(handing_off_desk(), journal=tmp_path / "runs.db")) as server:
        said = httpx.post(server.url + "/v1/chat/completions", json=body).json()["choices"][0]["message"]["content"]
        again = httpx.post(server.url + "/v1/chat/completions", json={**body, "stream": True})
        turns = httpx.get(server.url + "/v1/sessions/s-1").json()["turns"]
    assert again.status_code == 200
    assert [t["reply"] for t in turns] == [said, said] == [HANDED_ON, HANDED_ON]
    assert [t["output"] for t in turns] == [REFUNDED, REFUNDED]  # what the next turn's history holds


def test_force_route_naming_a_handoff_target_says_so_and_names_the_declared_routes() -> None:
    request = {"model": "desk", "input": "refund my order", "force_route": "refunds"}
    with running(create_app(handing_off_desk())) as server:
        refused = httpx.post(server.url + "/v1/runs", json=request)
        unknown = httpx.post(server.url + "/v1/runs", json={**request, "force_route": "nope"})
    assert refused.status_code == unknown.status_code == 400
    assert refused.json()["error"]["message"] == (  # was: "force_route 'refunds' is not a route; routes: ..."
        "force_route 'refunds' is not a declared route but a handoff target (a route's agent hands the turn to it; "
        "force_route picks a route); pass one of the declared routes of 'desk': billing, general"
    )
    assert unknown.json()["error"]["message"] == (
        "force_route 'nope' is not a declared route; pass one of the declared routes of 'desk': billing, general"
    )
