"""The Router: classify a request (any classifier), apply the threshold and fallback, dispatch.

The chosen route's agent — a full :class:`~jeeves_router.Agent` with its own model, tools
and architecture — runs under ``child_session_id(parent_session_id, route)``; its events
(token deltas included) appear in the parent's stream as they happen. Usage sums the
classifier's calls (format retries included) and every specialist attempt's.

Whichever classifier decides (the LLM text classifier, tool-call classification, the
embedded or cascade classifier, your own), the Router adds the same features around it:

* **Handoffs.** A specialist with ``Agent(handoffs=[...])`` may hand the conversation on
  after dispatch; with ``hand_back=True`` every specialist can hand it back to the router
  (``transfer_to_<router>``), which classifies it again. The chain keeps its guards
  (``max_handoffs``, ``max_edge_traversals``, announced-handoff detection) and each
  agent's ``history`` mode.
* **Sticky sessions.** With ``sticky=True`` a session's follow-up turn goes straight to the
  agent that answered it last (no classification) until it hands back, the caller resets
  (``options={"reset_sticky": True}`` or :meth:`Router.reset`), or a run does not answer.
  The lookup is a journaled step, so ``resume`` replays it.
* **Typed context.** ``context_schema`` validates the run's context before it starts; the
  classifier sees the validated values; tools may change them with ``ContextUpdate``.

Recovery (opt-in: ``recovery=Recovery(...)``, or any ``classify_error`` hook or route
``retry_policy``) runs failures through the shared ladder of :mod:`jeeves_router.recovery`:
the classifier retried under the framework policy; a failed specialist dispatched again
when RETRIABLE (never once its text reached the consumer), or the request classified again
without it (RECLASSIFICATION); CRITICAL ends the run ``"critical"`` with a report; FATAL raises.
Without recovery a specialist's exception reaches the caller unchanged, with its type.

:class:`~jeeves_router.HandoffRouter` is this Router preset for tool-call classification,
sticky sessions and hand-back.
"""

from __future__ import annotations

from collections.abc import Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

from ...classify.parser import normalize_route_name
from ...classify.prompt import validate_prompt_template
from ...classify.resolve import RouteDecision, resolve_route
from ...classify.types import Classification, Classifier, ClassifyRequest, ClassifyResult, RouteSpec
from ...errors import UsageError
from ...events import RouterClassified
from ...models.base import Model
from ...policies import check_count
from ...recovery.config import Recovery
from ...recovery.run import RecoveryRun, RecoveryStop, recovery_for
from ..base import RunContext
from ..checks import check_run_request
from ..handoffs.chain import Detector, chain_settings
from ..handoffs.graph import HandoffGraph, build_graph
from ..handoffs.session import SessionStore
from ..handoffs.tools import HistoryMode, announces_handoff
from ..routes import (
    RouterRoute,
    check_child_runtimes,
    check_classifier_routes,
    check_fallback,
    check_route_table,
    check_unit_interval,
)
from ._asking import checked, classified_event, classify_request, last_turns, visible_context
from .checks import check_chain_options, check_router_agent, forced_route
from .contract import CLASSIFIER_USAGE_KEY
from .run import RouterRun

if TYPE_CHECKING:
    from pydantic import BaseModel

    from ...actor import Actor
    from ...classify.llm import LLMClassifier

__all__ = ["Router", "RouterRoute", "CLASSIFIER_USAGE_KEY", "last_turns"]


class Router:
    """Route each request to one specialist agent, whichever classifier decides.

    Args:
        routes: The routes; names are unique case-insensitively (``-``/``_``/space alike).
        fallback_route: Used when the classification is unusable or below the threshold, or
            when a specialist names an unknown target twice; ``None`` makes such runs end
            ``unresolved``.
        require_confidence_above: Threshold in [0, 1]; a route is dispatched directly when
            its confidence is >= this value.
        classifier_prompt: Template for the LLM classifier's system prompt
            (``{routes}``, ``{route_names}``; other braces are literal).
        classifier_model: Model for the LLM classifier (default: the router agent's model).
        classifier: Any :class:`Classifier` (tool-call, embedded, cascade, static...) instead
            of the LLM text classifier.
        max_format_retries: Retries of a malformed LLM classifier reply (default 1).
        on_bad_confidence: Parser policy for a missing/invalid confidence (``None``: fail
            closed, i.e. fallback).
        history_turns: How many earlier turns the classifier sees (default 0; a turn starts
            at a user message).
        classifier_max_tokens: Output cap of the LLM classifier call.
        recovery: Recovery config (``None``: failures propagate unchanged unless a hook or
            a route retry policy turns the default recovery on).
        context_schema: A pydantic model the run's context must validate against; the
            classifier sees the validated values.
        sticky: Send a session's follow-up turns to the agent that answered it last.
        session_store: Where sticky sessions are kept (default: in memory); only with
            ``sticky=True`` (refused otherwise: it would be ignored).
        hand_back: Give every specialist a ``transfer_to_<router>`` tool that hands the
            request back to be classified again.
        max_handoffs: Most handoffs per run (the dispatch counts); then ``handoff_limit``.
        max_edge_traversals: How often one edge may be taken per run; then ``handoff_cycle``.
        history: What a specialist sees: ``"all"`` (the caller's history, the request and
            what earlier agents of the run said), ``"last"`` or a callable.
        detect_announced: ``(text, targets) -> bool`` for specialists' replies that announce
            a handoff without calling a tool (``None`` disables it).
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
        context_schema: type[BaseModel] | None = None,
        sticky: bool = False,
        session_store: SessionStore | None = None,
        hand_back: bool = False,
        max_handoffs: int = 8,
        max_edge_traversals: int = 2,
        history: HistoryMode = "all",
        detect_announced: Detector | None = announces_handoff,
    ) -> None:
        self.routes: tuple[RouterRoute, ...] = check_route_table(routes, owner=type(self).__name__)
        self._by_name = {r.name: r for r in self.routes}
        self._names = frozenset(self._by_name)
        check_fallback(fallback_route, self._by_name)
        check_unit_interval("require_confidence_above", require_confidence_above)
        if classifier is not None and (classifier_model is not None or classifier_prompt is not None):
            raise UsageError("pass either classifier=... or classifier_model/classifier_prompt, not both")
        check_classifier_routes(classifier, self.routes, owner=type(self).__name__)
        if isinstance(history_turns, bool) or not isinstance(history_turns, int) or history_turns < 0:
            raise UsageError(f"history_turns must be an integer >= 0, got {history_turns!r}")
        if context_schema is not None and not (
            isinstance(context_schema, type) and callable(getattr(context_schema, "model_validate", None))
        ):
            raise UsageError("context_schema must be a pydantic BaseModel subclass")
        self.fallback_route = fallback_route
        self.threshold = float(require_confidence_above)
        self.classifier_prompt = validate_prompt_template(classifier_prompt) if classifier_prompt is not None else None
        self.classifier_model = classifier_model
        check_count("max_format_retries", max_format_retries, 0)
        check_count("classifier_max_tokens", classifier_max_tokens, 1)
        if on_bad_confidence is not None:
            check_unit_interval("on_bad_confidence", on_bad_confidence)
        for flag, value in (("sticky", sticky), ("hand_back", hand_back)):
            if not isinstance(value, bool):
                raise UsageError(f"{flag} must be True or False, got {value!r}")
        self.max_format_retries = max_format_retries
        self.on_bad_confidence = on_bad_confidence
        self.history_turns = history_turns
        self.classifier_max_tokens = classifier_max_tokens
        if recovery is not None and not isinstance(recovery, Recovery):
            raise UsageError(f"recovery must be a Recovery(...) object, got {type(recovery).__name__}")
        self.recovery = recovery
        self.context_schema = context_schema
        self.hand_back = hand_back
        self.settings = chain_settings(
            max_handoffs=max_handoffs,
            max_edge_traversals=max_edge_traversals,
            history=history,
            detect_announced=detect_announced,
            sticky=sticky,
            session_store=session_store,
            owner=type(self).__name__,
        )
        self._classifier: Classifier | None = classifier
        self._built: WeakKeyDictionary[Actor, Classifier] = WeakKeyDictionary()  # without one: per router agent
        self.specs: tuple[RouteSpec, ...] = tuple(r.spec for r in self.routes)
        self._graph: tuple[Actor, HandoffGraph] | None = None
        self._chaining = hand_back or sticky
        # any route's hook or retry policy turns recovery on (routes are fixed: looked up once)
        self._route_hook = next(
            (h for r in self.routes for h in (r.classify_error, r.retry_policy) if h is not None), None
        )
        if classifier is None and classifier_model is not None:
            self._classifier = self._llm_classifier(classifier_model)
        check_chain_options(self, (r.agent for r in self.routes))  # agents reached by handoffs: at the first run

    def _llm_classifier(self, model: Model | str) -> LLMClassifier:
        from ...classify.llm import LLMClassifier  # only routers that classify with a model load it

        return LLMClassifier(
            model,
            prompt=self.classifier_prompt,
            max_format_retries=self.max_format_retries,
            max_tokens=self.classifier_max_tokens,
            on_bad_confidence=self.on_bad_confidence,
        )

    @property
    def sticky(self) -> bool:
        """True when follow-up turns go to the agent that answered the session last."""
        return self.settings.store is not None

    @property
    def chaining(self) -> bool:
        """True when a run may visit more than one specialist (or remember one): hand-back, sticky, handoffs."""
        return self._chaining

    @property
    def routes_by_name(self) -> Mapping[str, RouterRoute]:
        """The routes by name."""
        return self._by_name

    # -- Architecture protocol ----------------------------------------------------------

    #: What a router agent without a model is told (a preset without these options says its own).
    _no_model = (
        "has no model for its classifier: pass model=... to the Agent, or classifier_model=... or classifier=... "
        "to the Router"
    )

    def validate(self, agent: Actor) -> None:
        """A router agent needs a model unless it has its own classifier; specialists share its runtime.

        The router agent classifies and dispatches, nothing else: ``tools=`` or ``handoffs=``
        given to it would never be used, so they are refused rather than silently ignored.
        """
        check_child_runtimes(agent, self.routes)
        check_router_agent(agent)
        if self._classifier is None and agent.model is None:
            raise UsageError(f"router agent {agent.name!r} {self._no_model}")
        if normalize_route_name(agent.name) in {normalize_route_name(n) for n in self._by_name}:
            raise UsageError(f"router agent name {agent.name!r} is also a route name; rename one of them")

    def graph(self, agent: Actor) -> HandoffGraph:
        """The chain of a run: the router node, the routes, and every agent they may hand off to.

        Built on the first run of ``agent`` (names in ``handoffs=[...]`` resolve then).
        """
        if self._graph is None or self._graph[0] is not agent:
            graph = build_graph(
                agent,
                routes=[(r.name, r.agent, r.description) for r in self.routes],
                router=True,
                hand_back=self.hand_back,
                fallback=self.fallback_route,
            )
            check_chain_options(self, (n.agent for n in graph.nodes.values() if not n.is_router))
            self._graph = (agent, graph)
            self._chaining = self.hand_back or self.sticky or any(n.targets for n in graph.nodes.values())
        return self._graph[1]

    def prepare(self, agent: Actor, ctx: RunContext) -> None:
        """Check the per-run options and the context before the run starts."""
        check_run_request(agent, ctx, options=("reset_sticky",))
        if ctx.force_route is not None:  # the run (events, journal, result) names the route as declared
            ctx.force_route = forced_route(self, agent, ctx.force_route)
        if self.context_schema is not None:
            try:
                self.context_schema.model_validate(dict(ctx.context))
            except Exception as exc:  # pydantic's ValidationError
                msg = f"context does not match {self.context_schema.__name__}: {exc}"
                raise UsageError(msg, argument="context") from exc
        self.graph(agent)

    async def reset(self, session_id: str) -> None:
        """Forget the sticky agent of ``session_id``: its next turn is classified afresh."""
        if self.settings.store is not None:
            await self.settings.store.delete(session_id)

    def classifier_for(self, agent: Actor) -> Classifier:
        """The Router's classifier, else ``agent``'s own (built at its first run, kept per agent like :meth:`graph`)."""
        if self._classifier is not None:
            return self._classifier
        built = self._built.get(agent)
        if built is None:
            built = self._built[agent] = self._agent_classifier(agent)
        return built

    def _agent_classifier(self, agent: Actor) -> Classifier:
        """The classifier built for ``agent`` when the Router has none: the LLM classifier on its model."""
        return self._llm_classifier(agent.resolved_model())

    def route(self, name: str) -> RouterRoute:
        """The route called ``name``."""
        return self._by_name[name]

    def visible_context(self, context: Mapping[str, Any]) -> Mapping[str, Any]:
        """The context as the classifier sees it (validated by ``context_schema``, as JSON values)."""
        return visible_context(self.context_schema, context)

    async def classify(
        self,
        agent: Actor,
        ctx: RunContext,
        *,
        exclude: Sequence[str] = (),
        feedback: str | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> ClassifyResult:
        """Classify ``ctx.prompt`` (through the runtime); never returns an undeclared route."""
        request = self.classify_request(ctx, exclude=exclude, feedback=feedback, context=context)
        return self.checked(await ctx.classify(self.classifier_for(agent), request), request, exclude)

    def classify_request(
        self,
        ctx: RunContext,
        *,
        exclude: Sequence[str] = (),
        feedback: str | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> ClassifyRequest:
        """What the classifier is asked for ``ctx.prompt`` (the first half of :meth:`classify`)."""
        return classify_request(self, ctx, exclude=exclude, feedback=feedback, context=context)

    def checked(self, result: ClassifyResult, request: ClassifyRequest, exclude: Sequence[str] = ()) -> ClassifyResult:
        """``result`` held to the route contract of ``request`` (the second half of :meth:`classify`)."""
        return checked(self, result, request, exclude)

    def decide(self, c: Classification, *, exclude: Sequence[str] = ()) -> RouteDecision:
        """Threshold and fallback applied to ``c``."""
        return resolve_route(
            c, threshold=self.threshold, fallback=self.fallback_route, routes=self._by_name, excluded=exclude
        )

    def classified_event(self, ctx: RunContext, result: ClassifyResult) -> RouterClassified:
        """The ``router.classified`` event for ``result``."""
        return classified_event(self, ctx, result)

    def run(self, agent: Actor, ctx: RunContext) -> Coroutine[Any, Any, None]:
        """Classify, decide, dispatch, follow handoffs; emits router events (every agent emits its own)."""
        if self.recovery is None and agent.classify_error is None and self._route_hook is None:
            return RouterRun(self, agent, ctx, None).run()  # no recovery: no wrapper around the chain
        config = recovery_for(self.recovery, agent.classify_error, self._route_hook)
        assert config is not None
        return self._run_recovering(agent, ctx, RecoveryRun(config, ctx, can_escalate=ctx.escalate))

    async def _run_recovering(self, agent: Actor, ctx: RunContext, rec: RecoveryRun) -> None:
        run = RouterRun(self, agent, ctx, rec)
        try:
            await run.run()
        except RecoveryStop as stop:  # the report's result keeps the run's usage, failed attempts included
            route = stop.failure.route  # after a classification, keep its confidence as a dispatched result does
            fields = {"route": route, "confidence": run.confidence if route is not None else None}
            # the run's own tally (every turn that ended counts, also when a budget stops the next one)
            await ctx.emit(await rec.stopped(stop, usage=run.usage, usage_by_route=run.usage_by_route(), **fields))
