"""Toolsets: sources of tools opened around a run (:class:`Toolset`, :func:`open_toolsets`).

A :class:`Toolset` (e.g. :class:`jeeves_router.mcp.MCPServerStdio`) must be opened before
its tools can be called; an agent opens its toolsets around each run with
:func:`open_toolsets`, which puts their tools next to the agent's own. Re-exported by
:mod:`jeeves_router.tools`, whose names these are.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager, nullcontext
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ._args import listed, opened_toolset
from ._toolset_host import toolsets_in_use
from .errors import UsageError

if TYPE_CHECKING:
    from .tools import Tool

__all__ = ["Toolset", "open_toolsets", "split_toolsets"]


@runtime_checkable
class Toolset(Protocol):
    """A source of tools that must be opened before its tools can be called (an MCP server).

    ``open()`` returns an async context manager that connects (or joins a connection
    already open) and yields the tools; leaving it releases the connection.
    """

    def open(self) -> AbstractAsyncContextManager[Sequence[Tool]]:
        """Open the toolset for one user (a run, or an explicit ``async with``)."""
        ...


class _ToolOwner(Protocol):
    name: str
    tools: tuple[Tool, ...]
    tool_map: dict[str, Tool]
    toolsets: tuple[Toolset, ...]


def open_toolsets(owner: _ToolOwner) -> AbstractAsyncContextManager[None]:
    """Open ``owner``'s toolsets for one run and put their tools next to its own tools.

    The toolsets' tools stay in ``owner.tools`` and ``owner.tool_map`` after the run
    (a call outside a run reports that the toolset is closed); the next run lists them
    again.

    Raises:
        UsageError: if a toolset's tool has the name of another tool of ``owner``, or a
            toolset's ``open`` is no method returning an async context manager.
        ToolError: if a toolset cannot be opened (it says which and why).
    """
    return _open_toolsets(owner) if owner.toolsets else nullcontext()


@asynccontextmanager
async def _open_toolsets(owner: _ToolOwner) -> AsyncIterator[None]:
    async with AsyncExitStack() as stack:
        listed = [await stack.enter_async_context(opened_toolset(owner.name, ts)) for ts in owner.toolsets]
        own = [t for t in owner.tools if getattr(t, "toolset", None) is None]
        merged: dict[str, Tool] = {t.name: t for t in own}
        for ts, tools in zip(owner.toolsets, listed, strict=True):
            for t in tools:
                if t.name in merged:
                    raise UsageError(
                        f"agent {owner.name!r}: {ts!r} has a tool named {t.name!r}, like another tool of the agent; "
                        "give the toolset a tool_prefix"
                    )
                merged[t.name] = t
        owner.tool_map = merged
        owner.tools = tuple(merged.values())
        yield


def split_toolsets(items: Iterable[Any]) -> tuple[list[Any], tuple[Toolset, ...]]:
    """Split an agent's ``tools`` argument into plain tools (or functions) and toolsets."""
    given = listed(items, what="tools", example="tools=[lookup_invoice]")
    toolsets = tuple(t for t in given if isinstance(t, Toolset))
    if toolsets:
        toolsets_in_use()
    return [t for t in given if not isinstance(t, Toolset)], toolsets
