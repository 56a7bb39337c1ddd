"""One run of a handoff chain: visit agents, follow their handoffs, stop loops cleanly.

The target of a handoff is read from the tool result (``ctx.handoff``), never from text.
After each visit the chain decides: an answer ends the run; a handoff goes through the
guards — ``max_handoffs`` and an edge taken more than ``max_edge_traversals`` times end the
run with ``handoff_limit`` / ``handoff_cycle`` and a ``handoff.rejected`` event; an unknown
target named twice or a handoff announced twice without a tool call goes to the fallback
(or ends ``unresolved``).
Every agent after the entry runs under ``child_session_id(session_id, node)``.

:class:`~jeeves_router.Router` runs its routes and their handoffs with this same class
(``RouterRun``): it overrides what happens at the entry node (a decision, the
classification, instead of a visit), the hop events and the result, never the guards or
the sticky session.
"""

from __future__ import annotations

from collections.abc import Awaitable, Iterable, Sequence
from functools import partial
from typing import Any

from ..._aio import emit
from ...events import Event, HandoffCompleted, HandoffRejected, HandoffRequested
from ...messages import user
from ...results import RunResult, RunStatus
from .visit import Visit, VisitRunner

__all__ = ["ChainRun"]


class ChainRun(VisitRunner):
    """Executes one run of a chain; the architecture's ``run`` delegates here.

    Subclasses may override :meth:`_decide` (a node decided at instead of visited),
    :meth:`_enter` (how one node is visited), :meth:`_next` (where a visit leads),
    :meth:`_hop` (the event of an accepted handoff) and :meth:`_finish` (the result); the
    guards and the sticky session stay here.
    """

    __slots__ = ()

    async def run(self) -> None:
        """Visit agents until one answers or a guard stops the chain; sets ``ctx.result``.

        Events go to the consumer through ``ctx.emit``; every agent's run emits its own.
        """
        g, ctx, store = self.graph, self.ctx, self.settings.store
        current = g.entry
        incoming: tuple[str, str | None, Any] | None = None
        if ctx.force_route is not None:
            current = ctx.force_route
            await self._emit(self._hop(g.entry, current, "forced route"))
        elif store is not None:
            if ctx.options.get("reset_sticky"):
                if not ctx.superseded:  # a newer turn of the session has set its sticky agent since
                    await store.delete(ctx.session_id)
            else:
                # Journaled like any step, so resuming a sticky turn follows the recorded
                # decision instead of asking a session store that a new process has lost.
                last = await ctx.record("sticky", {"session_id": ctx.session_id}, partial(store.get, ctx.session_id))
                self.steps[ctx.session_id] = ctx._step
                if last is not None and last in g.nodes and last != g.entry:
                    current, self.sticky = last, True
                    await self._emit(
                        self._hop(g.entry, last, "sticky session: the last agent that answered", sticky=True)
                    )
        # The chain's own events (hops, rejections, closing events) are never text: sent with
        # the bare emit. ``ev`` is cleared before the next agent runs: the chain holds no sent event.
        ev: Event | None = None
        hop_events: Sequence[Event]
        try:
            while True:
                self.visited = (*self.visited, current)
                decision = self._decide(current, incoming)
                if decision is not None:  # a node the chain decides at (a router's own): no visit
                    hop_events = ()
                    target, reason, payload = await decision
                else:
                    visit = self._new_visit(g.nodes[current])
                    turn = self._enter(visit, incoming)
                    child = visit.child
                    if child is not None:
                        # A plain turn: while the agent runs, its run holds its context and the
                        # visit is not needed; it is made again from the context afterwards, so an
                        # in-flight run holds no visit object.
                        node, mark = visit.node, visit.mark
                        del visit
                        await turn
                        visit = self._new_visit(node)
                        visit.child, visit.mark = child, mark
                        del child
                        self._settle(visit)
                    else:
                        await turn
                    del turn
                    if visit.notes:  # e.g. a plain turn's tool handed off to an unknown target
                        for ev in visit.notes:
                            await emit(ev)
                        visit.notes = ()
                    if visit.redirect is not None:
                        current, incoming = visit.redirect, None
                        continue
                    if visit.handoff is None and visit.failure is None:
                        res = visit.result
                        assert res is not None
                        del visit  # not held while the closing events are sent
                        for ev in await self._finish(current, res.status, res):
                            await emit(ev)
                        return
                    hop_events, (target, reason, payload) = self._next(current, visit)
                    del visit  # not held while the next node runs
                for ev in hop_events:
                    await emit(ev)
                if target is None:
                    for ev in await self._finish(current, "unresolved", None):
                        await emit(ev)
                    return
                stop = self._check(current, target, reason)
                if stop is not None:
                    await emit(stop)
                    status: RunStatus = "handoff_limit" if stop.why == "limit" else "handoff_cycle"
                    for ev in await self._finish(current, status, None):
                        await emit(ev)
                    return
                for ev in self._hop(current, target, reason):
                    await emit(ev)
                del hop_events  # not held while the next agent runs
                ev = None
                incoming = (current, reason, payload)
                current = target
        except Exception:
            # A turn that fails ends without an answer, as an unresolved one does: the session
            # forgets its sticky agent, so the next turn is classified afresh.
            if store is not None:
                await self._remember(None)
            raise

    async def _emit(self, events: Iterable[Event]) -> None:
        """Emit each of ``events`` (none is held by the chain's frame once sent)."""
        for ev in events:
            await self.ctx.emit(ev)

    def _decide(
        self, current: str, incoming: tuple[str, str | None, Any] | None
    ) -> Awaitable[tuple[str | None, str | None, Any]] | None:
        """Where the chain goes from ``current`` without visiting it, or ``None`` to visit it.

        The awaitable emits the decision's events and gives ``(target, reason, payload)``
        (target ``None``: the run ends unresolved). A chain visits every node; a
        :class:`~jeeves_router.Router` decides at its own node (it classifies the request).
        """
        return None

    def _enter(self, visit: Visit, incoming: tuple[str, str | None, Any] | None) -> Awaitable[None]:
        """Visit one node, emitting its events; the outcome is left on ``visit`` (after :meth:`_settle`)."""
        return self._visit(visit, incoming)

    def _hop(self, frm: str, to: str, reason: str | None, *, sticky: bool = False) -> Sequence[Event]:
        """The events of an accepted move from ``frm`` to ``to`` (a handoff, a forced or sticky start)."""
        return (HandoffCompleted(**self._ev(), from_agent=frm, to_agent=to, reason=reason, sticky=sticky),)

    def _next(self, current: str, visit: Visit) -> tuple[Sequence[Event], tuple[str | None, str | None, Any]]:
        """Where a visit that handed off (or failed) leads: its events and ``(target, reason, payload)``."""
        ev = self._ev()
        if visit.handoff is None:
            # An unknown target named twice, or a handoff announced twice without a tool call.
            self.fallback_reason = visit.failure
            fallback = self.graph.fallback if self.graph.fallback != current else None
            reason = f"fallback: {visit.failure}"
            if fallback is None:
                return (), (None, reason, None)
            return (HandoffRequested(**ev, from_agent=current, to_agent=fallback, reason=reason),), (
                fallback,
                reason,
                None,
            )
        h = visit.handoff
        event = HandoffRequested(**ev, from_agent=current, to_agent=h.target, reason=h.reason, confidence=h.confidence)
        return (event,), (h.target, h.reason, h.payload)

    def _check(self, frm: str, to: str, reason: str | None) -> HandoffRejected | None:
        s = self.settings
        accepted = self.accepted
        if len(accepted) >= 3 * s.max_handoffs:
            return HandoffRejected(
                **self._ev(), from_agent=frm, to_agent=to, why="limit", reason=f"max_handoffs={s.max_handoffs} reached"
            )
        taken = 0
        if accepted:  # none before the first handoff of a run (a router's dispatch)
            for i in range(0, len(accepted), 3):
                if accepted[i] == frm and accepted[i + 1] == to:
                    taken += 1
        if taken >= s.max_edge_traversals:
            return HandoffRejected(
                **self._ev(),
                from_agent=frm,
                to_agent=to,
                why="cycle",
                reason=f"{frm} -> {to} already taken {taken} time(s) (max_edge_traversals={s.max_edge_traversals})",
            )
        self.accepted = (*accepted, frm, to, reason)
        return None

    async def _finish(self, node: str, status: RunStatus, res: RunResult | None) -> Sequence[Event]:
        """Set ``ctx.result`` (and the sticky session); the run's closing events."""
        ctx, g = self.ctx, self.graph
        used_fallback = self.fallback_reason is not None and status == "ok"
        if used_fallback:
            status = "fallback"
        answered = res is not None and status in ("ok", "fallback")
        await self._remember(node if answered else None)
        ctx.context = self.context
        ctx.result = RunResult(
            output=res.output if answered and res is not None else None,
            status=status,
            session_id=ctx.session_id,
            path=ctx.path,
            route=node if answered else None,
            confidence=self.confidence,
            used_fallback=used_fallback,
            fallback_reason=self.fallback_reason,
            specialist_session_id=self._sid(node) if node != g.entry else None,
            usage=self.usage,
            usage_by_route=dict(self.usage_by),
            messages=(user(ctx.prompt), *self.transcript),
            report=res.report if res is not None else None,
            metadata={
                **(dict(res.metadata) if res is not None else {}),
                "handoffs": self.handoffs(),
                "agents": tuple(self.visited),
                "last_agent": node,
                "sticky": self.sticky,
            },
        )
        return ()

    def handoffs(self) -> tuple[dict[str, Any], ...]:
        """The accepted handoffs so far, as ``{"from", "to", "reason"}`` dicts (the result's metadata)."""
        a = self.accepted
        return tuple({"from": a[i], "to": a[i + 1], "reason": a[i + 2]} for i in range(0, len(a), 3))

    async def _remember(self, node: str | None) -> None:
        """Keep ``node`` as the session's sticky agent (``None`` or the entry: forget it).

        Not for an older turn run again after a newer one started (``ctx.superseded``: a retried
        idempotency key, a resume): the session's sticky agent is the newer turn's.
        """
        store = self.settings.store
        if store is None or self.ctx.superseded:
            return
        if node is not None and node != self.graph.entry:
            await store.set(self.ctx.session_id, node)
        else:
            await store.delete(self.ctx.session_id)
