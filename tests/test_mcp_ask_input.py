"""The MCP ``ask`` tool refuses what the HTTP server refuses: an empty request, one over the size limit.

``ask`` ran an empty (or blank) request, and took a 3 MB one that the HTTP server refuses as
over its 1 MiB ``max_request_bytes``; arguments of the wrong type, or a missing request, came back
as pydantic's raw text with an errors.pydantic.dev URL. Now each is an error result naming the
rule, and nothing runs.
"""

from __future__ import annotations

import pytest

from jeeves_router import Agent
from jeeves_router._limits import DEFAULT_MAX_REQUEST_BYTES, too_large
from jeeves_router.errors import UsageError
from jeeves_router.testing import FunctionModel

pytest.importorskip("mcp")


def _desk(asked: list[str]) -> Agent:
    def answer(request: object) -> str:
        asked.append("asked")
        return "hello"

    return Agent("Answer.", name="desk", model=FunctionModel(answer))


@pytest.mark.anyio
@pytest.mark.parametrize("request_text", ["", "   ", "\n\t "])
async def test_ask_refuses_an_empty_or_blank_request_and_runs_nothing(request_text: str) -> None:
    from mcp import Client

    from jeeves_router.mcp.server import router_server

    asked: list[str] = []
    async with Client(router_server(_desk(asked))) as client:
        res = await client.call_tool("ask", {"request": request_text})
    assert res.is_error
    assert res.content[0].text == "the request is empty: send the text to ask; nothing was run"  # type: ignore[union-attr]
    assert asked == []


@pytest.mark.anyio
async def test_ask_refuses_a_request_over_the_http_servers_body_limit() -> None:
    from mcp import Client

    from jeeves_router.mcp.server import router_server
    from jeeves_router.mcp.server import serve as mcp_serve
    from jeeves_router.serve.app import create_app

    for front in (create_app, mcp_serve, router_server):  # one limit, under one name, for both doors
        assert front.__kwdefaults__["max_request_bytes"] == DEFAULT_MAX_REQUEST_BYTES
        assert "max_body_bytes" not in front.__kwdefaults__
    asked: list[str] = []
    async with Client(router_server(_desk(asked))) as client:
        res = await client.call_tool("ask", {"request": "x" * 3_000_000})
        assert res.is_error
        text = res.content[0].text  # type: ignore[union-attr]
        assert text == f"{too_large(DEFAULT_MAX_REQUEST_BYTES, 'the request')}; nothing was run"
        assert "1048576 bytes" in text
        assert asked == []
        at_limit = await client.call_tool("ask", {"request": "x" * DEFAULT_MAX_REQUEST_BYTES})
        assert not at_limit.is_error and asked == ["asked"]


@pytest.mark.anyio
async def test_the_request_limit_counts_utf8_bytes_and_can_be_set() -> None:
    from mcp import Client

    from jeeves_router.mcp.server import router_server

    asked: list[str] = []
    async with Client(router_server(_desk(asked), max_request_bytes=10)) as client:
        over = await client.call_tool("ask", {"request": "é" * 6})  # 6 characters, 12 bytes
        assert over.is_error
        assert over.content[0].text == "the request is larger than the server's limit of 10 bytes; nothing was run"  # type: ignore[union-attr]
        ok = await client.call_tool("ask", {"request": "é" * 5})
        assert not ok.is_error
    assert asked == ["asked"]
    for bad in (0, -1, True, "10"):
        with pytest.raises(UsageError, match="max_request_bytes must be a positive integer"):
            router_server(_desk(asked), max_request_bytes=bad)  # type: ignore[arg-type]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        ({}, "argument 'request' is required; nothing was run"),
        ({"request": 5}, "argument 'request' must be a string; nothing was run"),
        ({"request": "hi", "session_id": 3}, "argument 'session_id' must be a string; nothing was run"),
    ],
)
async def test_bad_arguments_get_a_clean_message_not_pydantics_text(arguments: dict[str, object], said: str) -> None:
    from mcp import Client

    from jeeves_router.mcp.server import router_server

    asked: list[str] = []
    async with Client(router_server(_desk(asked))) as client:
        res = await client.call_tool("ask", arguments)
        tools = await client.list_tools()
    assert res.is_error
    assert res.content[0].text == said  # type: ignore[union-attr]
    assert asked == []
    schema = tools.tools[0].input_schema
    assert schema["required"] == ["request"] and schema["properties"]["request"]["type"] == "string"
