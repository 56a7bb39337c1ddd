"""What the model reads of an MCP answer, and of a failed call."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import anyio

from .._log import get_logger
from ..errors import ToolError, ToolOutcomeUnknown

log = get_logger("jeeves_router.mcp.client")

__all__ = ["describe", "failure", "content_text", "unknown", "unreached"]

_CONNECTION_CLOSED = -32000  # the JSON-RPC error code the SDK gives pending requests when the transport ends


def describe(exc: BaseException) -> str:
    """``Type: first line of the message``, looking inside a group of one."""
    inner = getattr(exc, "exceptions", None)  # an exception group (no backport import on 3.10)
    if isinstance(inner, tuple) and len(inner) == 1 and isinstance(inner[0], BaseException):
        return describe(inner[0])
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def failure(exc: Exception) -> str:
    """What went wrong with a call, said of the server (``"is not running (...)"``, ...)."""
    from mcp import MCPError
    from pydantic import ValidationError

    if isinstance(exc, MCPError):
        if exc.code == _CONNECTION_CLOSED:
            return f"is not running (the connection closed: {exc.message})"
        return f"answered with an error: {exc.message}"
    if isinstance(exc, (ValidationError, RuntimeError, ValueError)):
        return f"answered with malformed data ({describe(exc)})"
    if isinstance(exc, (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError)):
        return f"is not running (the connection closed: {describe(exc)})"
    return f"failed: {describe(exc)}"


def content_text(content: Sequence[Any], structured: Any) -> str:
    """The text the model sees: text blocks as they are, other blocks described."""
    parts: list[str] = []
    for block in content:
        kind = getattr(block, "type", None)
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            parts.append(f"[{kind} {block.mime_type}, {len(block.data) * 3 // 4} bytes]")
        elif kind == "resource_link":
            parts.append(f"[resource {block.uri}]")
        elif kind == "resource":
            res = block.resource
            text = getattr(res, "text", None)
            parts.append(text if isinstance(text, str) else f"[resource {res.uri}, {res.mime_type or 'binary'}]")
    if not parts and structured is not None:
        return json.dumps(structured, ensure_ascii=False, default=str)
    return "\n".join(parts)


def unreached(server: str, tool: str, why: str, *, again: bool = True) -> ToolError:
    """The error of a call that was not sent: the server could not be reached (again) (retriable)."""
    log.warning("mcp tool call not sent", server=server, tool=tool, why=why)
    return ToolError(
        f"{tool}: MCP server {server!r} could not be reached{' again' if again else ''} ({why}); the call was not sent",
        severity="retriable",
        metadata={"mcp_server": server, "tool": tool, "sent": False},
    )


def unknown(server: str, tool: str, why: str, *, timed_out: bool) -> ToolOutcomeUnknown:
    """The error of a call the server had, then left without an answer: it may have run (critical).

    ``why``: the connection ended (:func:`failure`'s ``"is not running (...)"``), or
    (``timed_out``) ``"did not answer within ..."``.
    """
    log.warning("mcp tool call outcome unknown", server=server, tool=tool, why=why)
    if timed_out:
        lead = f"MCP server {server!r} had the call but {why}"
    else:
        lead = f"the connection to MCP server {server!r} ended while the call was with it"
        lead += f" {why.removeprefix('is not running ')}"
    return ToolOutcomeUnknown(
        f"{tool}: {lead}; whether it ran is unknown, so it was not sent again",
        metadata={"mcp_server": server, "tool": tool, "outcome": "unknown", "timed_out": timed_out},
    )
