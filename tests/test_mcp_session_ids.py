"""The MCP ``ask`` tool takes the session ids the HTTP server takes, and refuses the rest.

``ask`` ran with any ``session_id`` (``../x``, 5,000 characters, a space), filing turns under an
id that ``GET /v1/sessions/{id}`` of a server sharing the journal refuses as malformed, and that
no HTTP request could continue. Now such an id is an error result naming the rule, and nothing runs.
"""

from __future__ import annotations

import pytest

from jeeves_router import Agent
from jeeves_router.ids import SESSION_ID_RULE
from jeeves_router.testing import FunctionModel

pytest.importorskip("mcp")


@pytest.mark.anyio
async def test_ask_refuses_a_session_id_the_http_server_refuses_and_runs_nothing() -> None:
    from mcp import Client

    from jeeves_router.mcp.server import router_server

    asked: list[str] = []

    def answer(request: object) -> str:
        asked.append("asked")
        return "hello"

    agent = Agent("Answer.", name="desk", model=FunctionModel(answer))
    async with Client(router_server(agent)) as client:
        for bad in ("../x", "x" * 5000, "a b", "-lead"):
            res = await client.call_tool("ask", {"request": "hi", "session_id": bad})
            assert res.is_error, bad
            assert res.content[0].text == f"{SESSION_ID_RULE}; nothing was run"  # type: ignore[union-attr]
        assert asked == []
        ok = await client.call_tool("ask", {"request": "hi", "session_id": "s-1.a:b_c"})
        assert not ok.is_error and ok.structured_content is not None
        assert ok.structured_content["session_id"] == "s-1.a:b_c"
        assert asked == ["asked"]
