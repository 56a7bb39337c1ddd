"""One tool of an MCP server as the tool loop sees it (:class:`MCPTool`), and the tools a server offers."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..models.base import ToolSpec
from ..tools import TOOL_NAME_CHARS, Tool, ToolContext, ToolOutcome

if TYPE_CHECKING:
    from mcp import Client

    from .client import MCPServer

__all__ = ["BAD_NAME", "MCPTool", "listed_tools"]

#: What a model provider refuses in a tool name (replaced by ``_`` in a server's tool names).
BAD_NAME = re.compile(f"[^{TOOL_NAME_CHARS}]")


class MCPTool(Tool):
    """One tool of an MCP server, as the tool loop sees it (schema from the server).

    Attributes:
        remote_name: The tool's name on the server (``name`` may add a prefix and replace
            characters a model provider does not accept).
        toolset: The server it belongs to.
    """

    def __init__(self, server: MCPServer, remote_name: str, description: str, schema: Mapping[str, Any]) -> None:
        name = BAD_NAME.sub("_", f"{server.tool_prefix}{remote_name}")[:64]
        self.fn = server.call
        self.name = name
        self.remote_name = remote_name
        self.toolset = server
        self.hinted_repeatable = False  # the server marks it read-only or idempotent
        self.description = description
        params = dict(schema) if isinstance(schema, Mapping) else {}
        params.setdefault("type", "object")
        params.setdefault("properties", {})
        params.pop("title", None)
        self.parameters = params
        self.spec = ToolSpec(name, description, params)

    @property
    def repeatable(self) -> bool:
        """Harmless to call twice, as its server's ``repeatable`` setting says (see :attr:`Tool.repeatable`)."""
        return self.toolset.repeats(self.remote_name, hinted=self.hinted_repeatable)

    def __repr__(self) -> str:
        return f"MCPTool({self.name!r}, server={self.toolset.name!r})"

    async def call(self, arguments: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        """Call the tool on its server (see :meth:`MCPServer.call`: a lost connection may raise)."""
        return await self.toolset.call(self.remote_name, arguments)


async def listed_tools(server: MCPServer, client: Client) -> tuple[MCPTool, ...]:
    """The tools ``client`` lists (every page), those ``server.allowed_tools`` allows, with their repeat hints."""
    tools: list[MCPTool] = []
    cursor: str | None = None
    for _ in range(100):  # a server whose pages never end cannot hang the start
        page = await client.list_tools(cursor=cursor)
        for t in page.tools:
            if server.allowed_tools is None or t.name in server.allowed_tools:
                tools.append(MCPTool(server, t.name, t.description or t.title or "", t.input_schema))
                hints = t.annotations
                tools[-1].hinted_repeatable = bool(hints and (hints.read_only_hint or hints.idempotent_hint))
        cursor = page.next_cursor
        if cursor is None:
            break
    return tuple(tools)
