"""The Router architecture: classify a request, apply a threshold and a fallback, dispatch.

The chosen route's agent — a full :class:`~jeeves_router.Agent` with its own model, tools
and architecture — runs under ``child_session_id(parent_session_id, route)``; its events
(token deltas included) appear in the parent's stream as they happen. Usage sums the
classifier's calls (format retries included) and the specialist's.

Recovery (opt-in: ``recovery=Recovery(...)``, or any ``classify_error`` hook or route
``retry_policy``) runs failures through the shared ladder of :mod:`jeeves_router.recovery`:
the classifier retried under the framework policy; a failed specialist dispatched again
when RETRIABLE (never once its text reached the consumer), or the request classified again
without it (RECLASSIFICATION); CRITICAL ends the run ``"critical"`` with a report; FATAL raises.
Without recovery a specialist's exception reaches the caller unchanged, with its type.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING

from ..._aio import aclose, aclosing
from ...classify.prompt import validate_prompt_template
from ...classify.resolve import RouteDecision, resolve_route, valid_confidence
from ...classify.types import Classification, Classifier, ClassifyRequest, ClassifyResult, RouteSpec
from ...errors import UsageError
from ...events import (
    Event,
    RouterClassified,
    RouterCompleted,
    RouterDispatched,
    RouterFallback,
    RouterUnresolved,
    TextDelta,
)
from ...ids import child_session_id
from ...models.base import Model
from ...recovery.config import Recovery
from ...recovery.ladder import Action
from ...recovery.run import Failure, RecoveryRun, RecoveryStop, recovery_for
from ...results import RunResult
from ...usage import NO_USAGE, Usage
from ..base import RunContext, run_child
from ..routes import RouterRoute, check_child_runtimes, check_fallback, check_route_table, check_unit_interval
from .contract import with_failed_usage, within_contract

if TYPE_CHECKING:
    from ...actor import Actor
    from ...classify.llm import LLMClassifier

__all__ = ["Router", "RouterRoute", "CLASSIFIER_USAGE_KEY"]

#: Key of the classifier's usage in ``RunResult.usage_by_route`` (not a valid route name).
CLASSIFIER_USAGE_KEY = "<classifier>"


class Router:
    """Route each request to one specialist agent.

    Args:
        routes: The routes; names are unique case-insensitively (``-``/``_``/space alike).
        fallback_route: Used when the classification is unusable or below the threshold;
            ``None`` makes such runs end ``unresolved``.
        require_confidence_above: Threshold in [0, 1]; a route is dispatched directly when
            its confidence is >= this value.
        classifier_prompt: Template for the LLM classifier's system prompt
            (``{routes}``, ``{route_names}``; other braces are literal).
        classifier_model: Model for the LLM classifier (default: the router agent's model).
        classifier: Any :class:`Classifier` (embedded, cascade, static...) instead of the
            LLM classifier.
        max_format_retries: Retries of a malformed LLM classifier reply (default 1).
        on_bad_confidence: Parser policy for a missing/invalid confidence (``None``: fail
            closed, i.e. fallback).
        history_turns: How many earlier messages the classifier sees (default 0).
        classifier_max_tokens: Output cap of the LLM classifier call.
        recovery: Recovery config (``None``: failures propagate unchanged unless a hook or
            a route retry policy turns the default recovery on).
    """

    def __init__(
        self,
        routes: Sequence[RouterRoute],
        *,
        fallback_route: str | None = None,
        require_confidence_above: float = 0.0,
        classifier_prompt: str | None = None,
        classifier_model: Model | str | None = None,
        classifier: Classifier | None = None,
        max_format_retries: int = 1,
        on_bad_confidence: float | None = None,
        history_turns: int = 0,
        classifier_max_tokens: int = 64,
        recovery: Recovery | None = None,
    ) -> None:
        self.routes: tuple[RouterRoute, ...] = check_route_table(routes, owner="Router")
        self._by_name = {r.name: r for r in self.routes}
        self._names = frozenset(self._by_name)
        check_fallback(fallback_route, self._by_name)
        check_unit_interval("require_confidence_above", require_confidence_above)
        if classifier is not None and (classifier_model is not None or classifier_prompt is not None):
            raise UsageError("pass either classifier=... or classifier_model/classifier_prompt, not both")
        if classifier is not None and not isinstance(classifier, Classifier):
            raise UsageError(f"classifier must have an async classify(request) method, got {type(classifier).__name__}")
        if history_turns < 0:
            raise UsageError(f"history_turns must be >= 0, got {history_turns}")
        self.fallback_route = fallback_route
        self.threshold = float(require_confidence_above)
        self.classifier_prompt = validate_prompt_template(classifier_prompt) if classifier_prompt is not None else None
        self.classifier_model = classifier_model
        self.max_format_retries = max_format_retries
        self.on_bad_confidence = on_bad_confidence
        self.history_turns = history_turns
        self.classifier_max_tokens = classifier_max_tokens
        if recovery is not None and not isinstance(recovery, Recovery):
            raise UsageError(f"recovery must be a Recovery(...) object, got {type(recovery).__name__}")
        self.recovery = recovery
        self._classifier: Classifier | None = classifier
        self.specs: tuple[RouteSpec, ...] = tuple(r.spec for r in self.routes)
        if classifier is None and classifier_model is not None:
            self._classifier = self._llm_classifier(classifier_model)

    def _llm_classifier(self, model: Model | str) -> LLMClassifier:
        from ...classify.llm import LLMClassifier  # only routers that classify with a model load it

        return LLMClassifier(
            model,
            prompt=self.classifier_prompt,
            max_format_retries=self.max_format_retries,
            max_tokens=self.classifier_max_tokens,
            on_bad_confidence=self.on_bad_confidence,
        )

    # -- Architecture protocol ----------------------------------------------------------

    def validate(self, agent: Actor) -> None:
        """A router agent needs a model unless it has its own classifier; specialists share its runtime."""
        check_child_runtimes(agent, self.routes)
        if self._classifier is None and agent.model is None:
            raise UsageError(
                f"router agent {agent.name!r} has no model for its classifier: pass model=..., "
                "classifier_model=... or classifier=..."
            )

    def prepare(self, agent: Actor, ctx: RunContext) -> None:
        """Check per-run options before the run starts."""
        if ctx.force_route is not None and ctx.force_route not in self._by_name:
            raise UsageError(f"force_route {ctx.force_route!r} is not a route; routes: {', '.join(self._by_name)}")

    def classifier_for(self, agent: Actor) -> Classifier:
        """The classifier used for ``agent`` (built from its model on first use)."""
        if self._classifier is None:
            self._classifier = self._llm_classifier(agent.resolved_model())
        return self._classifier

    def route(self, name: str) -> RouterRoute:
        """The route called ``name``."""
        return self._by_name[name]

    async def classify(
        self, agent: Actor, ctx: RunContext, *, exclude: Sequence[str] = (), feedback: str | None = None
    ) -> ClassifyResult:
        """Classify ``ctx.prompt`` (through the runtime); never returns an undeclared route."""
        specs = self.specs if not exclude else tuple(s for s in self.specs if s.name not in exclude)
        history = ctx.history[-self.history_turns :] if self.history_turns else ()
        request = ClassifyRequest(ctx.prompt, specs, history=history, context=ctx.context, feedback=feedback)
        result = await ctx.classify(self.classifier_for(agent), request)
        checked = within_contract(result.classification, self._names if not exclude else {s.name for s in specs})
        return result if checked is result.classification else replace(result, classification=checked)

    def decide(self, c: Classification, *, exclude: Sequence[str] = ()) -> RouteDecision:
        """Threshold and fallback applied to ``c``."""
        return resolve_route(
            c, threshold=self.threshold, fallback=self.fallback_route, routes=self._by_name, excluded=exclude
        )

    def classified_event(self, ctx: RunContext, result: ClassifyResult) -> RouterClassified:
        """The ``router.classified`` event for ``result``."""
        c = result.classification
        return RouterClassified(
            session_id=ctx.session_id,
            path=ctx.path,
            route=c.route,
            confidence=c.confidence,
            status=c.status,
            threshold=self.threshold,
            raw=c.raw,
            reason=c.reason,
            requested=c.requested,
            runner_up=c.runner_up,
            runner_up_confidence=c.runner_up_confidence,
            margin=c.margin,
            stage=result.stage,
            attempts=result.attempts,
            model_calls_saved=result.model_calls_saved,
        )

    def run(self, agent: Actor, ctx: RunContext) -> AsyncGenerator[Event, None]:
        """Classify, decide, dispatch; yields router events and the specialist's events."""
        hooks = [agent.classify_error, *(r.classify_error for r in self.routes), *(r.retry_policy for r in self.routes)]
        config = recovery_for(self.recovery, *hooks)
        if config is None:  # no recovery: no wrapper generator between the flow and the consumer
            return self._flow(agent, ctx, None)
        return self._run_recovering(agent, ctx, RecoveryRun(config, ctx, can_escalate=len(ctx.path) > 1))

    async def _run_recovering(self, agent: Actor, ctx: RunContext, rec: RecoveryRun) -> AsyncGenerator[Event, None]:
        try:
            async with aclosing(self._flow(agent, ctx, rec)) as events:
                async for ev in events:
                    yield ev
        except RecoveryStop as stop:
            yield await rec.stopped(stop, route=stop.failure.route)

    async def _flow(self, agent: Actor, ctx: RunContext, rec: RecoveryRun | None) -> AsyncGenerator[Event, None]:
        sid, path = ctx.session_id, ctx.path
        usage = NO_USAGE
        failed_usage: dict[str, Usage] = {}  # what failed dispatch attempts spent, by route
        excluded: list[str] = []
        feedback: str | None = None
        while True:
            confidence: float | None = None
            if ctx.force_route is not None:
                decision = RouteDecision(ctx.force_route, False, None)
            else:
                if rec is None:
                    cres = await self.classify(agent, ctx, exclude=tuple(excluded), feedback=feedback)
                else:
                    classify = partial(self.classify, agent, ctx, exclude=tuple(excluded), feedback=feedback)
                    hooks = (agent.classify_error,)
                    out = await rec.call("classify", classify, hooks=hooks)
                    while isinstance(out, Failure):
                        yield rec.retry_event(out)
                        await rec.backoff(out)
                        out = await rec.call("classify", classify, after=out, hooks=hooks)
                    cres = out
                usage = usage + cres.usage
                ctx.ledger.spent((*path, CLASSIFIER_USAGE_KEY), cres.usage)
                if rec is not None:
                    rec.usage = usage + sum(failed_usage.values(), Usage())
                c = cres.classification
                confidence = c.confidence if c.ok and valid_confidence(c.confidence) else None
                yield self.classified_event(ctx, cres)
                decision = self.decide(c, exclude=excluded)
                if decision.unresolved:
                    yield RouterUnresolved(
                        session_id=sid,
                        path=path,
                        reason=decision.reason or "missing_route",
                        requested_route=c.route or c.requested,
                        confidence=confidence,
                    )
                    ctx.result = RunResult(
                        output=None,
                        status="unresolved",
                        session_id=sid,
                        path=path,
                        confidence=confidence,
                        fallback_reason=decision.reason,
                        usage=usage,
                        usage_by_route={CLASSIFIER_USAGE_KEY: usage},
                        metadata={"excluded_routes": tuple(excluded)} if excluded else {},
                    )
                    return
                if decision.used_fallback:
                    assert decision.route is not None
                    yield RouterFallback(
                        session_id=sid,
                        path=path,
                        reason=decision.reason or "low_confidence",
                        fallback_route=decision.route,
                        requested_route=c.route or c.requested,
                        confidence=confidence,
                    )
            assert decision.route is not None
            route = self._by_name[decision.route]
            operation = f"route:{route.name}"
            attempt = 0
            while True:
                attempt += 1
                if rec is not None:
                    rec.begin(operation)
                streamed = False
                mark = ctx.ledger.mark()
                dispatched, child = self.dispatched(ctx, route)
                yield dispatched
                events = run_child(route.agent, child)  # its events pass straight through
                try:
                    async for ev in events:
                        streamed = streamed or isinstance(ev, TextDelta)
                        yield ev
                except Exception as exc:
                    if rec is None:
                        raise
                    lost = ctx.ledger.since(mark, (*path, route.name))
                    failed_usage[route.name] = failed_usage.get(route.name, Usage()) + lost
                    rec.usage = rec.usage + lost
                    f = rec.fail(
                        exc,
                        operation=operation,
                        attempt=attempt,
                        policy=route.retry_policy or rec.config.retry_policy,
                        hooks=(route.classify_error, route.agent.classify_error, agent.classify_error),
                        route=route.name,
                        output_started=streamed,
                        can_reclassify=ctx.force_route is None and len(excluded) + 1 < len(self.routes),
                    )
                    if f.action is Action.RETRY:
                        yield rec.retry_event(f)
                        await rec.backoff(f)
                        continue
                    if f.action is Action.RECLASSIFY:
                        excluded.append(route.name)
                        feedback = f.feedback()
                        yield rec.reclassify_event(f, excluded)
                        break
                    raise f.stop() from exc
                finally:
                    await aclose(events)
                yield self.completed(ctx, route, child, decision, usage, confidence)
                if rec is not None:
                    rec.succeeded(operation)
                    if excluded and ctx.result is not None:
                        meta = {**ctx.result.metadata, "excluded_routes": tuple(excluded)}
                        ctx.result = replace(ctx.result, metadata=meta)
                if failed_usage and ctx.result is not None:
                    ctx.result = with_failed_usage(ctx.result, failed_usage)
                return

    def dispatched(self, ctx: RunContext, route: RouterRoute) -> tuple[RouterDispatched, RunContext]:
        """The ``router.dispatched`` event and the specialist's run context."""
        child_sid = child_session_id(ctx.session_id, route.name)
        ev = RouterDispatched(
            session_id=ctx.session_id,
            path=ctx.path,
            route=route.name,
            child_session_id=child_sid,
            forced=ctx.force_route is not None,
        )
        return ev, ctx.child(route.agent, session_id=child_sid, path=(*ctx.path, route.name))

    def completed(
        self,
        ctx: RunContext,
        route: RouterRoute,
        child: RunContext,
        decision: RouteDecision,
        classifier_usage: Usage,
        confidence: float | None,
    ) -> RouterCompleted:
        """Set ``ctx.result`` from the specialist's result; return the ``router.completed`` event."""
        res = child.result
        assert res is not None
        status = res.status
        if status == "ok" and decision.used_fallback:
            status = "fallback"
        by_route: dict[str, Usage] = {CLASSIFIER_USAGE_KEY: classifier_usage} if ctx.force_route is None else {}
        by_route[route.name] = res.usage
        ctx.context = child.context
        ctx.result = RunResult(
            output=res.output,
            status=status,
            session_id=ctx.session_id,
            path=ctx.path,
            route=route.name,
            confidence=confidence,
            used_fallback=decision.used_fallback,
            fallback_reason=decision.reason,
            specialist_session_id=child.session_id,
            usage=classifier_usage + res.usage,
            usage_by_route=by_route,
            messages=res.messages,
            report=res.report,
            metadata=res.metadata,
        )
        return RouterCompleted(
            session_id=ctx.session_id, path=ctx.path, route=route.name, status=res.status, usage=res.usage
        )
