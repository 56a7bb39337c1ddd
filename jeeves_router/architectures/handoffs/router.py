"""The handoff router: classification by tool call, context-aware and sticky.

The router agent's only job is to call one generated tool, ``classify_as_<route>(reason,
confidence=None)``; each returns :class:`~jeeves_router.tools.Handoff`, and the route is
read from that tool result, never from text, so a router turn cannot stall. The confidence
threshold and the fallback work as in :class:`~jeeves_router.Router`; the chosen route's
agent runs under ``child_session_id(session_id, route)`` and its events stream in the
parent's stream. Specialists may hand off further (``Agent(handoffs=[...])``) or hand back
to the router (``transfer_to_<router>``), within ``max_handoffs`` and the cycle guard.

Context-aware: the router sees the last ``history_turns`` turns and the run's context
variables (optionally validated by ``context_schema``); tools returning
:class:`~jeeves_router.tools.ContextUpdate` change them for the rest of the run only.

Sticky: with a session id, a follow-up turn goes straight to the agent that answered the
session last, until that agent hands back to the router or the caller resets
(``options={"reset_sticky": True}`` or ``await router.reset(session_id)``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ...classify.parser import normalize_route_name
from ...classify.resolve import RouteDecision, resolve_route
from ...classify.types import Classification, ParseStatus
from ...errors import UsageError
from ...events import Event
from ...messages import Message, TextPart
from ...tools import Handoff, Tool
from ..base import RunContext
from ..routes import RouterRoute, check_child_runtimes, check_fallback, check_route_table, check_unit_interval
from .chain import Detector, chain_settings
from .graph import HandoffGraph, build_graph
from .run import ChainRun
from .session import SessionStore
from .tools import HistoryMode, announces_handoff, classify_tool

if TYPE_CHECKING:
    from pydantic import BaseModel

    from ...actor import Actor

__all__ = ["HandoffRouter", "last_turns"]

_ROUTER_RULES = (
    "You are a router. Your only job is to call exactly one of the classify_as_<route> tools below; "
    "never answer the user yourself. Give a short reason and your confidence between 0 and 1."
)


def last_turns(history: Sequence[Message], n: int) -> tuple[Message, ...]:
    """The last ``n`` turns of ``history`` (a turn starts at a user message with text)."""
    if n <= 0:
        return ()
    starts = [i for i, m in enumerate(history) if m.role == "user" and any(isinstance(p, TextPart) for p in m.parts)]
    if len(starts) <= n:
        return tuple(history)
    return tuple(history[starts[-n] :])


class HandoffRouter:
    """Route each request by a classify-tool call, then follow handoffs.

    Args:
        routes: The routes (names unique case-insensitively, ``-``/``_``/space alike).
        fallback_route: Takes over below the threshold, for an unknown target named twice,
            or when the router (or a specialist) replies without calling a tool after one
            corrective re-prompt; ``None`` ends such runs ``unresolved``.
        require_confidence_above: Threshold in [0, 1] on the classify tool's confidence.
        on_missing_confidence: The confidence assumed when the model gives none
            (``None``: a missing confidence fails closed when the threshold is above 0).
        history_turns: How many earlier turns the router sees (default 0).
        context_schema: A pydantic model the run's context must validate against; the
            router sees the validated values.
        router_prompt: Extra instructions for the router turn (added after the agent's own).
        hand_back: Give every specialist a ``transfer_to_<router>`` tool to hand the
            request back for re-routing.
        max_handoffs: Most handoffs per run (the classification counts); then ``handoff_limit``.
        max_edge_traversals: How often one edge may be taken per run; then ``handoff_cycle``.
        history: What a specialist sees: ``"all"``, ``"last"`` or a callable.
        detect_announced: ``(text, targets) -> bool`` for specialists' replies that announce a
            handoff without calling a tool (``None`` disables it).
        sticky: Send a session's follow-up turns to the agent that answered it last.
        session_store: Where sticky sessions are kept (default: in memory).
    """

    def __init__(
        self,
        routes: Sequence[RouterRoute],
        *,
        fallback_route: str | None = None,
        require_confidence_above: float = 0.0,
        on_missing_confidence: float | None = None,
        history_turns: int = 0,
        context_schema: type[BaseModel] | None = None,
        router_prompt: str | None = None,
        hand_back: bool = True,
        max_handoffs: int = 8,
        max_edge_traversals: int = 2,
        history: HistoryMode = "all",
        detect_announced: Detector | None = announces_handoff,
        sticky: bool = True,
        session_store: SessionStore | None = None,
    ) -> None:
        self.routes: tuple[RouterRoute, ...] = check_route_table(routes, owner="HandoffRouter")
        self._by_name = {r.name: r for r in self.routes}
        check_fallback(fallback_route, self._by_name)
        check_unit_interval("require_confidence_above", require_confidence_above)
        if on_missing_confidence is not None:
            check_unit_interval("on_missing_confidence", on_missing_confidence)
        if isinstance(history_turns, bool) or not isinstance(history_turns, int) or history_turns < 0:
            raise UsageError(f"history_turns must be an integer >= 0, got {history_turns!r}")
        if context_schema is not None and not (
            isinstance(context_schema, type) and callable(getattr(context_schema, "model_validate", None))
        ):
            raise UsageError("context_schema must be a pydantic BaseModel subclass")
        self.fallback_route = fallback_route
        self.threshold = float(require_confidence_above)
        self.on_missing_confidence = on_missing_confidence
        self.history_turns = history_turns
        self.context_schema = context_schema
        self.router_prompt = router_prompt
        self.hand_back = hand_back
        self.settings = chain_settings(
            max_handoffs=max_handoffs,
            max_edge_traversals=max_edge_traversals,
            history=history,
            detect_announced=detect_announced,
            sticky=sticky,
            session_store=session_store,
        )
        self._tools = tuple(classify_tool(r.name, r.description, r.examples) for r in self.routes)

    # -- Architecture protocol ------------------------------------------------------------

    def validate(self, agent: Actor) -> None:
        """The router agent needs a model and a name that no route uses; specialists share its runtime."""
        check_child_runtimes(agent, self.routes)
        if agent.model is None:
            raise UsageError(f"handoff router agent {agent.name!r} has no model: pass model=... to its Agent")
        if normalize_route_name(agent.name) in {normalize_route_name(n) for n in self._by_name}:
            raise UsageError(f"router agent name {agent.name!r} is also a route name; rename one of them")

    def graph(self, agent: Actor) -> HandoffGraph:
        """The chain: the router node, the routes, and every agent they may hand off to."""
        return build_graph(
            agent,
            routes=[(r.name, r.agent, r.description) for r in self.routes],
            router=True,
            hand_back=self.hand_back,
            fallback=self.fallback_route,
        )

    def prepare(self, agent: Actor, ctx: RunContext) -> None:
        """Check the per-run options and the context before the run starts."""
        if ctx.force_route is not None and ctx.force_route not in self._by_name:
            raise UsageError(f"force_route {ctx.force_route!r} is not a route; routes: {', '.join(self._by_name)}")
        if self.context_schema is not None:
            try:
                self.context_schema.model_validate(dict(ctx.context))
            except Exception as exc:  # pydantic's ValidationError
                raise UsageError(f"context does not match {self.context_schema.__name__}: {exc}") from exc
        self.graph(agent)

    async def reset(self, session_id: str) -> None:
        """Forget the sticky agent of ``session_id``: its next turn is classified afresh."""
        if self.settings.store is not None:
            await self.settings.store.delete(session_id)

    def run(self, agent: Actor, ctx: RunContext) -> AsyncGenerator[Event, None]:
        """Classify by tool call, dispatch, follow handoffs; yields every agent's events."""
        return ChainRun(self.graph(agent), self.settings, agent, ctx, hooks=self).run()

    # -- RouterHooks ------------------------------------------------------------------------

    def router_tools(self) -> tuple[Tool, ...]:
        """The generated ``classify_as_<route>`` tools."""
        return self._tools

    def render_context(self, context: Mapping[str, Any]) -> str:
        """The context variables as the router sees them (JSON)."""
        data: Any = dict(context)
        if self.context_schema is not None:
            try:
                data = self.context_schema.model_validate(data).model_dump(mode="json")
            except Exception:  # pydantic's ValidationError
                pass  # a tool changed it mid-run; show it as it is
        return json.dumps(data, default=str, ensure_ascii=False, sort_keys=True)

    def router_turn(
        self, agent: Actor, ctx: RunContext, handed_back: tuple[str, str | None] | None, context: Mapping[str, Any]
    ) -> tuple[str, tuple[Message, ...], str]:
        """``(instructions, history, prompt)`` of a router turn."""
        parts = [agent.instructions.strip(), _ROUTER_RULES]
        if self.router_prompt:
            parts.append(self.router_prompt.strip())
        lines = []
        for r in self.routes:
            line = f"- {r.name}: {r.description or 'no description'}"
            if r.examples:
                line += " (e.g. " + "; ".join(json.dumps(e, ensure_ascii=False) for e in list(r.examples)[:3]) + ")"
            lines.append(line)
        parts.append("Routes:\n" + "\n".join(lines))
        if context:
            parts.append("Context variables (JSON): " + self.render_context(context))
        if handed_back is not None:
            who, why = handed_back
            parts.append(
                f"The request was handed back by {who}"
                + (f": {why}" if why else "")
                + ". Pick the route that fits now."
            )
        return "\n\n".join(p for p in parts if p), last_turns(ctx.history, self.history_turns), ctx.prompt

    def decide(self, handoff: Handoff) -> RouteDecision:
        """Threshold and fallback applied to a ``classify_as_<route>`` handoff (as the Router decides)."""
        confidence = handoff.confidence if handoff.confidence is not None else self.on_missing_confidence
        route = handoff.target if handoff.target in self._by_name else None
        status: ParseStatus
        if route is None:
            status = "unknown_route"
        elif confidence is None and self.threshold > 0.0:
            status = "missing_confidence"
        else:
            status = "ok"
        c = Classification(
            route,
            confidence if confidence is not None else 0.0,
            status,
            raw=f"tool:classify_as_{handoff.target}",
            reason=handoff.reason,
            requested=handoff.target,
        )
        return resolve_route(c, threshold=self.threshold, fallback=self.fallback_route, routes=self._by_name)
