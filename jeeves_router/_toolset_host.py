"""Where toolset connections live during a run: :class:`ToolsetHost` (see :mod:`jeeves_router.tools`).

Re-exported by :mod:`jeeves_router.tools`, whose names these are.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from contextvars import ContextVar
from typing import Any

import anyio
import anyio.abc

from ._loops import running_loop

__all__ = ["TaskHost", "ToolsetHost", "current_toolset_host", "toolset_host", "toolsets_in_use"]

_HOST: ContextVar[ToolsetHost | None] = ContextVar("jeeves_toolset_host", default=None)
_toolsets_in_use = False  # set once an agent gets a toolset: until then a host costs nothing


def toolsets_in_use() -> None:
    """Note that an agent has a toolset: from now on :func:`toolset_host` makes hosts."""
    global _toolsets_in_use
    _toolsets_in_use = True


def toolset_host() -> ToolsetHost | None:
    """A new :class:`ToolsetHost`, or ``None`` while no agent has a toolset (nothing to host)."""
    return ToolsetHost() if _toolsets_in_use else None


def current_toolset_host() -> ToolsetHost | None:
    """The innermost entered :class:`ToolsetHost` of this task, if any (for toolset connections)."""
    return _HOST.get()


class ToolsetHost:
    """Hosts the connections toolsets open inside it (an async context manager).

    A toolset connection (an MCP client) runs a task group of its own. Opened inside a run
    that is a chain of async generators, that task group would stay entered in the
    consumer's task between events, and a cancel scope the consumer enters around part of
    the iteration would then exit out of order. :class:`~jeeves_router.agent.RunStream`
    enters a host in its ``async with``, so connections opened during the stream live in a
    task of this task group instead. Toolsets still close their connections when their run
    ends; on exit the host cancels whatever is left and waits for it. While no agent has a
    toolset, entering a host does nothing.
    """

    def __init__(self) -> None:
        self._tg: anyio.abc.TaskGroup | None = None
        self._token: Any = None
        self._used = False

    def start_soon(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None:
        """Run ``fn(*args)`` in the host's task group."""
        assert self._tg is not None, "ToolsetHost.start_soon outside its async with"
        self._used = True
        self._tg.start_soon(fn, *args)

    async def __aenter__(self) -> ToolsetHost:
        if _toolsets_in_use:
            tg = anyio.create_task_group()
            await tg.__aenter__()
            self._tg = tg
            self._token = _HOST.set(self)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        tg, self._tg = self._tg, None
        if tg is None:
            return
        _HOST.reset(self._token)
        if self._used:
            tg.cancel_scope.cancel()
        # the body's own exception is not passed in: the task group would wrap it in a group
        await tg.__aexit__(None, None, None)


class TaskHost(ToolsetHost):
    """A :class:`ToolsetHost` whose task group runs in a task of its own, not in the caller's.

    For a connection a run opens with no host around it (a stream read without ``async
    with``): a task group entered inside the run would stay entered in the reading task
    between events, so the run could only be read on, and end, in that task; read on by
    another task (a server's response task, after the handler read the first events), it
    failed as it closed the connection. This host can be entered in one task and left in
    another. Leaving it cancels what is left and waits for its task. Under an event loop
    other than asyncio it is a plain :class:`ToolsetHost` (its task group in the caller's task).
    """

    def __init__(self) -> None:
        super().__init__()
        self._task: asyncio.Task[None] | None = None
        self._stop = anyio.Event()

    async def __aenter__(self) -> TaskHost:
        loop = running_loop()
        if loop is None:
            self._tg = anyio.create_task_group()
            await self._tg.__aenter__()
            return self
        started = anyio.Event()

        async def serve() -> None:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                started.set()
                await self._stop.wait()
                tg.cancel_scope.cancel()

        self._task = loop.create_task(serve())
        try:
            await started.wait()
        except BaseException:
            self._task.cancel()
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        task, self._task = self._task, None
        if task is None:
            tg, self._tg = self._tg, None
            if tg is not None:
                tg.cancel_scope.cancel()
                await tg.__aexit__(None, None, None)
            return
        self._stop.set()
        with anyio.CancelScope(shield=True):
            await asyncio.wait([task])  # waits without raising its outcome
        self._tg = None
        if not task.cancelled():
            task.exception()  # retrieved (its task group raises none: a host's tasks never raise)
