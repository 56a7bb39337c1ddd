"""The events of one root run (:meth:`Agent.stream <jeeves_router.Agent.stream>`): :class:`RunStream`."""

from __future__ import annotations

import types
from collections.abc import Awaitable
from contextlib import AbstractContextManager, nullcontext
from types import TracebackType
from typing import TYPE_CHECKING

from ._aio import EventPump
from .events import Event, EventBase
from .results import RunResult
from .tools import ToolsetHost, toolset_host
from .usage import Usage, collecting_cut_requests, cut_requests_into, with_spent_usage

if TYPE_CHECKING:
    from .agent import Agent
    from .architectures.base import RunContext

__all__ = ["RunStream"]

_COUNTED_OUTSIDE: list[Usage] = []  # RunStream._cut: an enclosing cut_requests scope counts the cut requests
_NOTHING: AbstractContextManager[None] = nullcontext()


class RunStream(EventPump[Event]):
    """The events of one run: an async iterator and an async context manager.

    Closing it early (``break`` then :meth:`aclose`, ``async with``, or
    ``contextlib.aclosing``) stops the run at its current await point: model streams are
    closed, no task is left behind, and no exception group escapes. The run is pull-based
    (no producer task): it advances when the next event is asked for, so a slow consumer
    slows the run instead of buffering events without bound. A failed run yields its
    ``run.failed`` event, then raises; the exception is also kept in :attr:`error`.
    """

    __slots__ = ("_ctx", "_cut", "_host")

    def __init__(self, agent: Agent, ctx: RunContext) -> None:
        super().__init__(agent._root(ctx), EventBase)  # type: ignore[arg-type]
        self._ctx = ctx
        self._host: ToolsetHost | None = None  # where MCP connections live under `async with`
        # what the requests a cancellation or a close cut off had spent (see _reporting); None until
        # the run first steps, _COUNTED_OUTSIDE when a cut_requests scope open then counts them
        self._cut: list[Usage] | None = None

    if TYPE_CHECKING:

        def __anext__(self) -> Awaitable[Event]:
            """The next event."""
            ...

        def drain(self) -> Awaitable[None]:
            """Run the run to its end, discarding its events."""
            ...

    else:

        @types.coroutine
        def __anext__(self):
            with self._reporting():
                return (yield from EventPump.__anext__(self))

        @types.coroutine
        def drain(self):
            with self._reporting():
                return (yield from EventPump.drain(self))

    async def aclose(self) -> None:
        """Stop the run at its current await point (see the class docstring).

        A model request whose answer was streaming when the run was closed was sent: its
        adapter reports it (:func:`~jeeves_router.usage.spent_when_cut`) and :attr:`spent`
        counts it, with an unknown cost — unless a :func:`~jeeves_router.usage.cut_requests`
        scope is open (the HTTP server's): its owner counts it then, as it counts a request a
        cancellation cut.
        """
        with self._reporting():
            await super().aclose()

    def _reporting(self) -> AbstractContextManager[None]:
        """While the run's code runs: report the requests cut off in it to this stream (:attr:`spent`).

        Decided as the run first steps: a :func:`~jeeves_router.usage.cut_requests` scope open
        then (the HTTP server's) counts them itself. Otherwise the stream's own list is the scope
        while the run steps — also for the tasks it starts (concurrent capability selections),
        which keep it — and never while the consumer has an event, whose code may run other agents.
        Entered once per event: no generator.
        """
        sink = self._cut
        if sink is None:
            sink = self._cut = _COUNTED_OUTSIDE if collecting_cut_requests() else []
        return _NOTHING if sink is _COUNTED_OUTSIDE else cut_requests_into(sink)

    def _failed(self, failure: BaseException) -> None:
        """The run failed: what leaves it carries the whole run's spend (``spent_usage``).

        Inside the run a failure carries what its own step spent (a failed model call's
        requests), which the layer that catches it enters in the run's ledger. Past the root
        nobody inside the run reads it again, so the caller gets the run's whole spend, the
        figure its ``run.failed`` event gives: a tool that ran this agent counts it in the
        calling run (:attr:`~jeeves_router.tools.ToolOutcome.usage`), an application can bill it.
        """
        super()._failed(failure)
        if isinstance(failure, Exception):
            with_spent_usage(failure, self._ctx.ledger.since(0, self._ctx.path), replace=True)

    @property
    def session_id(self) -> str:
        """The session id of the run."""
        return self._ctx.session_id

    @property
    def spent(self) -> Usage:
        """What the run has spent so far: every model request whose answer (or failure) came back.

        The run's and the runs' below it (a routed specialist, a handoff target, a classifier),
        failed requests included, as its ``run.failed`` would say, and once the stream is closed
        (:meth:`aclose`) or cancelled the requests it left waiting or mid-answer (cost unknown),
        its concurrent ones included. When a :func:`~jeeves_router.usage.cut_requests` scope was
        open as the run started (the HTTP server's) they are reported to it instead: its owner
        adds them; a journaling runtime's ``run.end`` ``cut`` counts them either way.
        """
        spent = self._ctx.ledger.since(0, self._ctx.path)
        for used in self._cut or ():
            spent = spent + used
        return spent

    @property
    def replayed(self) -> bool:
        """True once the run has started as a replay of a completed earlier attempt of it.

        A journaling runtime replays a completed run for a retried idempotency key (and for
        :meth:`Agent.resume`): its answer and events come from the journal. Known from the
        first event on; ``False`` for a run executed live (also one resumed after a cut-off
        or a failure).
        """
        return self._ctx.replayed

    @property
    def result(self) -> RunResult | None:
        """The result, once the stream has been consumed to its end (``None`` if it failed)."""
        return self._ctx.result if self.error is None else None

    async def __aenter__(self) -> RunStream:
        self._host = toolset_host()
        if self._host is not None:
            await self._host.__aenter__()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            await self.aclose()
        finally:
            if self._host is not None:
                await self._host.__aexit__(exc_type, exc, tb)
