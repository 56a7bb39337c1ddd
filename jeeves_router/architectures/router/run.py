"""One run of a :class:`~jeeves_router.Router`: the handoff chain with a classifier at its entry.

The Router's routes and every agent they may hand off to form a handoff chain
(:class:`~jeeves_router.architectures.handoffs.run.ChainRun`, the one chain engine), whose
entry node is the router itself. At that node the chain decides instead of visiting an
agent: it classifies the request with the Router's classifier — whichever it is — and
applies the Router's decision (threshold, fallback, contract); the chosen route is where
the chain goes, as a handoff would take it. So the sticky session, the
specialists' history mode, the guards (``max_handoffs``, ``max_edge_traversals``) and a
specialist's hand-back (``transfer_to_<router>``: classified again) are the same for every
classifier.

Recovery acts at two places: a classification is retried under the framework policy; a
failed specialist is dispatched again (RETRIABLE, never once its text reached the
consumer and never re-executing a completed tool call) or the request is classified
again without its route (RECLASSIFICATION) — on a sticky or handed-off turn as well (an
agent that is not a route: without the route the turn was dispatched to).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from ..._aio import emit
from ..._frozen import constructor
from ...classify.types import ClassifyResult
from ...events import Event, RouterCompleted, RouterDispatched, RouterFallback, RouterUnresolved
from ...messages import user
from ...recovery.ladder import Action
from ...recovery.run import RecoveryRun
from ...results import RunResult, RunStatus
from ...usage import NO_USAGE, Usage
from ..base import RunContext
from ..handoffs.run import ChainRun
from ..handoffs.visit import Visit
from .contract import CLASSIFIER_USAGE_KEY

if TYPE_CHECKING:
    from ...actor import Actor
    from .router import Router

__all__ = ["RouterRun"]

# built on every routed run, without type.__call__ (see constructor)
_run_result = constructor(RunResult)
_dispatched = constructor(RouterDispatched)
_completed = constructor(RouterCompleted)


class RouterRun(ChainRun):
    """Executes one run of a Router; ``Router.run`` delegates here."""

    __slots__ = ("classifier_usage", "excluded", "feedback", "rec", "router")

    def __init__(self, router: Router, agent: Actor, ctx: RunContext, rec: RecoveryRun | None) -> None:
        super().__init__(router.graph(agent), router.settings, agent, ctx)
        self.router, self.rec = router, rec
        self.excluded: tuple[str, ...] = ()
        self.feedback: str | None = None  # why the last dispatch failed (recovery)
        # the classifier's usage, kept apart from ``usage_by`` until the result (no dict while a specialist runs)
        self.classifier_usage: Usage | None = None

    def _escalates(self) -> bool:
        # with recovery, a failed dispatch is retried, reclassified or stopped here
        return self.rec is not None or self.ctx.escalate

    # -- the entry node: classification ----------------------------------------------------

    def _decide(
        self, current: str, incoming: tuple[str, str | None, Any] | None
    ) -> Awaitable[tuple[str | None, str | None, Any]] | None:
        return self._classify(incoming) if current == self.graph.entry else None

    def _enter(self, visit: Visit, incoming: tuple[str, str | None, Any] | None) -> Awaitable[None]:
        if self.rec is None:  # no recovery: the specialist's exception reaches the caller unchanged
            return self._visit(visit, incoming)
        return self._dispatch(visit, incoming, self.rec)

    async def _classify(self, incoming: tuple[str, str | None, Any] | None) -> tuple[str | None, str | None, Any]:
        """Classify the request at the router's node: ``(route, reason, None)``, or no route (unresolved)."""
        router, ctx, rec = self.router, self.ctx, self.rec
        feedback = self.feedback
        if incoming is not None:  # handed back by a specialist
            who, why = incoming[0], incoming[1]
            feedback = (
                f"{who} handed the request back" + (f" ({why})" if why else "") + "; pick the route that fits now."
            )
        if rec is None:  # Router.classify inline: no coroutine layer between this run and the runtime's step
            request = router.classify_request(ctx, exclude=self.excluded, feedback=feedback, context=self.context)
            try:
                cres: ClassifyResult = await ctx.classify(router.classifier_for(self.agent), request)
            except Exception as exc:  # the run fails: the requests it sent still count (its run.failed says them)
                self._failed_spent(exc)
                raise
            cres = router.checked(cres, request, self.excluded)
        else:
            classify = partial(
                router.classify, self.agent, ctx, exclude=self.excluded, feedback=feedback, context=self.context
            )
            cres = await rec.call_retrying(
                "classify",
                partial(self._counted, classify),
                hooks=(self.agent.classify_error,),
                spent=self._classifier_spent,  # the requests the time box cut off
            )
        self.steps[ctx.session_id] = ctx._step
        self._classifier_spent(cres.usage)
        c = cres.classification
        # checked against the contract above: an ``ok`` classification has a valid confidence
        self.confidence = c.confidence if c.ok else None
        await emit(router.classified_event(ctx, cres))  # not text: the bare emit
        decision = router.decide(c, exclude=self.excluded)
        requested = c.route or c.requested
        if decision.unresolved:
            await ctx.emit(
                RouterUnresolved(
                    **self._ev(),
                    reason=decision.reason or "missing_route",
                    requested_route=requested,
                    confidence=self.confidence,
                )
            )
            self.fallback_reason = decision.reason
            return None, None, None
        assert decision.route is not None
        if decision.used_fallback:
            await ctx.emit(
                RouterFallback(
                    **self._ev(),
                    reason=decision.reason or "low_confidence",
                    fallback_route=decision.route,
                    requested_route=requested,
                    confidence=self.confidence,
                )
            )
        self.fallback_reason = decision.reason if decision.used_fallback else None
        return decision.route, c.reason, None

    def _hop(self, frm: str, to: str, reason: str | None, *, sticky: bool = False) -> Sequence[Event]:
        if frm != self.graph.entry:
            return super()._hop(frm, to, reason)
        dispatched = self._dispatched(to)
        return (*super()._hop(frm, to, reason, sticky=True), dispatched) if sticky else (dispatched,)

    def _dispatched(self, route: str) -> RouterDispatched:
        forced = self.ctx.force_route is not None
        ctx = self.ctx
        return _dispatched(
            session_id=ctx.session_id, path=ctx.path, route=route, child_session_id=self._sid(route), forced=forced
        )

    # -- the other nodes: dispatch, with recovery -------------------------------------------

    async def _dispatch(self, visit: Visit, incoming: tuple[str, str | None, Any] | None, rec: RecoveryRun) -> None:
        router, ctx, node = self.router, self.ctx, visit.node
        route = router.routes_by_name.get(node.name)
        from_router = incoming is None or incoming[0] == self.graph.entry
        sid, path = self._sid(node.name), self._path(node.name)
        operation = f"route:{node.name}"
        # what a RECLASSIFICATION leaves out: the failed route, else the route the turn was dispatched to
        left_out = self._left_out(node.name)
        excluding = self.excluded if left_out is None or left_out in self.excluded else (*self.excluded, left_out)
        attempt = 0
        while True:
            attempt += 1
            if attempt > 1 and from_router:
                await ctx.emit(self._dispatched(node.name))  # the first one came with the hop
            await rec.begin(operation)
            step, mark, texts = self.steps.get(sid, 0), ctx.ledger.mark(), ctx.ledger.texts
            usage, by = self.usage, self.usage_by.get(node.name)
            try:
                await self._visit(visit, incoming)  # the specialist's events go straight to the consumer
                self._settle(visit)
            except Exception as exc:
                visit.child = None  # a failed attempt: nothing to settle
                # a retry runs the same steps again: the ledger answers completed tool calls
                self.steps[sid] = step
                # the ledger has every response of the attempt, a turn of it that ended (a re-prompted
                # announced handoff) included: count from before the attempt, so that turn counts once
                self.usage = usage
                if by is None:
                    self.usage_by.pop(node.name, None)
                else:
                    self.usage_by[node.name] = by
                self._spent(node.name, ctx.ledger.since(mark, path), None)
                hooks = (route.classify_error,) if route is not None else ()
                f = rec.fail(
                    exc,
                    operation=operation,
                    attempt=attempt,
                    policy=(route.retry_policy if route is not None else None) or rec.config.retry_policy,
                    hooks=(*hooks, node.agent.classify_error, self.agent.classify_error),
                    route=node.name,
                    output_started=ctx.ledger.texts != texts,  # some of its text reached the consumer
                    can_reclassify=ctx.force_route is None and len(excluding) < len(router.routes),
                )
                if f.action is Action.RETRY:
                    await ctx.emit(rec.retry_event(f))
                    await rec.backoff(f)
                    visit.result = visit.handoff = visit.failure = None
                    visit.unknown = 0
                    continue
                if f.action is Action.RECLASSIFY:
                    self.sticky = False  # a new classification answers this turn, not the sticky route
                    self.excluded = excluding
                    self.feedback = f.feedback()
                    await ctx.emit(rec.reclassify_event(f, self.excluded))
                    visit.redirect = self.graph.entry
                    return
                raise f.stop() from exc
            rec.succeeded(operation)
            return

    def _left_out(self, node: str) -> str | None:
        """The route a reclassification after ``node`` failed leaves out.

        A route's own name; for an agent reached by a handoff, the route its turn was
        dispatched to (none on a sticky turn that went straight to it).
        """
        routes, visited, entry = self.router.routes_by_name, self.visited, self.graph.entry
        if node in routes:
            return node
        if entry not in visited:
            return None
        dispatched = len(visited) - visited[::-1].index(entry)  # just after the router's last decision
        return visited[dispatched] if dispatched < len(visited) and visited[dispatched] in routes else None

    async def _counted(self, classify: Callable[[], Awaitable[ClassifyResult]]) -> ClassifyResult:
        """One classification attempt; a failed one's ``spent_usage`` still counts (see :class:`Classifier`)."""
        try:
            return await classify()
        except Exception as exc:
            self._failed_spent(exc)
            raise

    def _failed_spent(self, failure: Exception) -> None:
        """Count what a failed classification spent (its ``spent_usage``: the requests it sent)."""
        spent = getattr(failure, "spent_usage", None)
        if isinstance(spent, Usage):
            self._classifier_spent(spent)

    def _classifier_spent(self, used: Usage) -> None:
        self.classifier_usage = used if self.classifier_usage is None else self.classifier_usage + used
        self._spent(None, used, (*self.ctx.path, CLASSIFIER_USAGE_KEY))

    def _spent(self, key: str | None, usage: Usage, ledger_path: tuple[str, ...] | None) -> None:
        """Count ``usage`` in the run's total and under ``key`` (``None``: the total only), and in the ledger."""
        self.usage = self.usage + usage
        if key is not None:
            self.usage_by[key] = self.usage_by.get(key, NO_USAGE) + usage
        if ledger_path is not None:
            self.ctx.ledger.spent(ledger_path, usage)

    def usage_by_route(self) -> dict[str, Usage]:
        """The usage so far per route, the classifier's under its own key."""
        if self.classifier_usage is None:
            return dict(self.usage_by)
        return {CLASSIFIER_USAGE_KEY: self.classifier_usage, **self.usage_by}

    # -- the result -----------------------------------------------------------------------

    async def _finish(self, node: str, status: RunStatus, res: RunResult | None) -> Sequence[Event]:
        ctx, g, router = self.ctx, self.graph, self.router
        dispatched = res is not None and node != g.entry
        used_fallback = dispatched and self.fallback_reason is not None and status == "ok"
        if used_fallback:
            status = "fallback"
        if self.settings.store is not None:
            await self._remember(node if dispatched and status in ("ok", "fallback") else None)
        ctx.context = self.context
        metadata: dict[str, Any] = dict(res.metadata) if res is not None else {}
        if router.chaining:
            metadata.update(handoffs=self.handoffs(), agents=self.visited, last_agent=node, sticky=self.sticky)
        if self.excluded:
            metadata["excluded_routes"] = tuple(self.excluded)
        if dispatched and len(self.visited) - self.visited.count(g.entry) == 1:  # one specialist answered
            messages = res.messages if res is not None else ()
        else:
            messages = (user(ctx.prompt), *self.transcript) if self.transcript else ()
        ctx.result = _run_result(
            output=res.output if dispatched and res is not None else None,
            status=status,
            session_id=ctx.session_id,
            path=ctx.path,
            route=node if dispatched else None,
            confidence=self.confidence,
            used_fallback=used_fallback,
            fallback_reason=self.fallback_reason,
            specialist_session_id=self._sid(node) if dispatched else None,
            usage=self.usage,
            usage_by_route=self.usage_by_route(),
            messages=messages,
            report=res.report if res is not None else None,
            metadata=metadata,
        )
        if not dispatched or res is None:
            return ()
        # the answering agent's usage_by_route entry: every visit and attempt of it in the turn, not the last one's
        used = self.usage_by.get(node, res.usage)
        return (_completed(session_id=ctx.session_id, path=ctx.path, route=node, status=res.status, usage=used),)
