"""Model Context Protocol: tools from MCP servers (and, in :mod:`.server`, a router served as one).

``from jeeves_router.mcp import MCPServerStdio, MCPServerHTTP`` gives an agent the tools of
an MCP server (see :mod:`jeeves_router.mcp.client`). :mod:`jeeves_router.mcp.server` serves
an agent or a router to MCP clients (``jeeves-router mcp module:attr``). Both need the
``mcp`` extra.
"""

from __future__ import annotations

from .client import IDEMPOTENCY_META_KEY, MCPServer, MCPTool
from .transports import MCPServerHTTP, MCPServerStdio

__all__ = ["IDEMPOTENCY_META_KEY", "MCPServer", "MCPServerHTTP", "MCPServerStdio", "MCPTool"]
