"""What the MCP ``ask`` tool refuses before it runs anything: its arguments, the request, the idempotency key.

Each refusal is an error result naming the rule it breaks, and nothing runs: arguments
that do not fit the tool's input schema (:func:`ask_tool`: a clean message, not pydantic's
text), an empty or blank request, one over the size limit the HTTP server keeps
(:data:`~jeeves_router._limits.DEFAULT_MAX_REQUEST_BYTES`, :func:`~jeeves_router._limits.too_large`),
and an idempotency key the agent cannot honour.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from .._limits import EMPTY_REQUEST, blank, too_large
from ..errors import UsageError
from ..ids import check_idempotency_key
from ..runtime import journal_advice

if TYPE_CHECKING:
    from mcp.server.mcpserver.tools import Tool

    from ..agent import Agent

__all__ = ["IDEMPOTENCY_META", "ask_tool", "client_key", "key_problem", "meta_of", "request_problem"]

#: How an MCP server gives its agent a journal (what a plain agent's refusal of a key says).
MCP_JOURNAL = (
    "start the server with --journal (jeeves-router mcp AGENT --journal runs.db, or serve(agent, journal=...))"
)

#: The ``_meta`` key of an ``ask`` request that holds its idempotency key.
IDEMPOTENCY_META = "idempotency_key"

NOTHING_RUN = "nothing was run"


def request_problem(request: str, limit: int) -> str | None:
    """Why ``ask`` refuses ``request`` (``None``: it does not): empty or blank, or over ``limit`` UTF-8 bytes."""
    if blank(request):
        return f"{EMPTY_REQUEST}; {NOTHING_RUN}"
    if len(request) > limit or len(request.encode("utf-8", "surrogatepass")) > limit:
        return f"{too_large(limit, 'the request')}; {NOTHING_RUN}"
    return None


def argument_problem(errors: list[Any]) -> str:
    """A clean refusal of arguments failing the input schema (pydantic's error dicts): each field and its fault."""
    told = []
    for err in errors:
        where = ".".join(str(p) for p in err.get("loc", ())) or "arguments"
        kind = err.get("type", "")
        what = {"missing": "is required", "string_type": "must be a string"}.get(kind, f"is invalid ({kind})")
        told.append(f"argument {where!r} {what}")
    return f"{'; '.join(told) or 'the arguments are invalid'}; {NOTHING_RUN}"


def ask_tool(fn: Callable[..., Any], *, name: str, description: str) -> Tool:
    """The ``mcp`` SDK tool running ``fn``, whose argument errors are :func:`argument_problem`'s text."""
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.server.mcpserver.tools import Tool
    from pydantic import ValidationError

    class AskTool(Tool):
        async def run(self, arguments: dict[str, Any], context: Any, convert_result: bool = False) -> Any:
            try:
                return await super().run(arguments, context, convert_result)
            except ToolError as exc:
                if not isinstance(exc.__cause__, ValidationError):  # the SDK's own text says the rest
                    raise
                raise ToolError(argument_problem(exc.__cause__.errors())) from exc.__cause__

    return AskTool.from_function(fn, name=name, description=description)


def meta_of(ctx: Any) -> Mapping[str, Any]:
    """The request's ``_meta`` (empty for a call made outside a request, e.g. ``server.call_tool``)."""
    try:
        return (ctx.request_context.meta if ctx is not None else None) or {}
    except ValueError:  # the SDK's "Context is not available outside of a request"
        return {}


def client_key(sent: object, agent: Agent) -> str | None:
    """The idempotency key of ``ask`` from the key a jeeves MCP client sent (``IDEMPOTENCY_META_KEY``).

    ``None`` when none was sent, or the agent has no journaling runtime (the client sends its
    key on every call: it is no request of the user's to refuse). A key that
    :func:`~jeeves_router.ids.check_idempotency_key` would refuse (too long, not printable
    ASCII) is replaced by ``"jr-sha256:"`` and the hex SHA-256 of its UTF-8 text: the same
    key always maps to the same run.
    """
    if sent is None or not getattr(agent.runtime, "honours_idempotency_keys", False):
        return None
    text = sent if isinstance(sent, str) else json.dumps(sent, sort_keys=True, default=str)
    try:
        check_idempotency_key(text)
    except UsageError:
        return "jr-sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return text


def key_problem(key: object, agent: Agent) -> str | None:
    """Why ``ask`` cannot honour the idempotency key ``key`` (``None``: it can)."""
    try:
        check_idempotency_key(key)
    except UsageError:
        return f"_meta.{IDEMPOTENCY_META} must be 1-255 printable ASCII characters; {NOTHING_RUN}"
    if not getattr(agent.runtime, "honours_idempotency_keys", False):
        advice = journal_advice(agent.runtime, MCP_JOURNAL)
        return f"_meta.{IDEMPOTENCY_META} cannot be honoured for agent {agent.name!r}: {advice}; {NOTHING_RUN}"
    return None
