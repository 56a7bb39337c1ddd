"""One agent's turn inside a handoff chain, and the state the chain keeps between turns.

A visit runs the agent's own architecture (normally the tool loop) on a view of the agent
that also has the generated handoff tools, under the agent's session id; the agent's
events pass through to the parent's stream. While they pass, the visit watches the tool
results: a handoff call the tool loop ignored (an earlier call of the turn already handed
off) is reported as a ``duplicate``; a call to a handoff tool that does not exist, or an
own tool returning a ``Handoff`` to an unknown target, is an ``unknown`` target the model
may correct once. A text reply that announces a handoff (or any text reply of a router)
gets one corrective re-prompt.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ..._aio import aclosing
from ...classify.resolve import RouteDecision
from ...errors import UsageError
from ...events import Event, HandoffRejected, ToolResult
from ...ids import child_session_id
from ...messages import Message
from ...results import FallbackReason, RunResult
from ...tools import Handoff, Tool, ToolOutcome
from ...usage import Usage
from ..base import Architecture, RunContext, run_child
from ..react import ToolLoop
from .graph import HandoffGraph, HandoffNode
from .session import SessionStore
from .tools import (
    CLASSIFY_PREFIX,
    TRANSFER_PREFIX,
    GuardedTool,
    HandoffInput,
    HistoryMode,
    agent_view,
    target_conversation,
    transfer_tool,
)

if TYPE_CHECKING:
    from ...actor import Actor

__all__ = ["CLASSIFIER_KEY", "ChainSettings", "RouterHooks", "Visit", "VisitRunner"]

#: Usage key of a handoff router's own turns (same key as the Router's classifier).
CLASSIFIER_KEY = "<classifier>"

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ChainSettings:
    """The guards and choices of a handoff chain (see :class:`HandoffChain`)."""

    max_handoffs: int = 8
    max_edge_traversals: int = 2
    history: HistoryMode = "all"
    detect_announced: Callable[[str, Sequence[str]], bool] | None = None
    store: SessionStore | None = None


class RouterHooks(Protocol):
    """What a handoff router adds to a chain: its classification turn and its threshold."""

    def router_tools(self) -> tuple[Tool, ...]:
        """The ``classify_as_<route>`` tools."""
        ...

    def router_turn(
        self, agent: Actor, ctx: RunContext, handed_back: tuple[str, str | None] | None, context: Mapping[str, Any]
    ) -> tuple[str, tuple[Message, ...], str]:
        """``(instructions, history, prompt)`` of the router's turn."""
        ...

    def decide(self, handoff: Handoff) -> RouteDecision:
        """Threshold and fallback applied to a classification handoff."""
        ...


@dataclass(eq=False)
class Visit:
    """One agent's turn (and its corrective re-prompt) within a chain."""

    node: HandoffNode
    inner: Architecture
    tool_targets: dict[str, str]
    tool_names: set[str]
    handoff_call: str | None = None
    unknown: int = 0
    notes: list[Event] = field(default_factory=list)
    # outcome
    result: RunResult | None = None
    handoff: Handoff | None = None
    failure: FallbackReason | None = None


class VisitRunner:
    """Runs visits and keeps what a chain accumulates across them (context, usage, transcript)."""

    def __init__(
        self,
        graph: HandoffGraph,
        settings: ChainSettings,
        agent: Actor,
        ctx: RunContext,
        hooks: RouterHooks | None = None,
    ) -> None:
        self.graph, self.settings, self.agent, self.ctx, self.hooks = graph, settings, agent, ctx, hooks
        self.context = ctx.context
        self.steps: dict[str, int] = {ctx.session_id: ctx._step}
        self.usage = Usage()
        self.usage_by: dict[str, Usage] = {}
        self.transcript: list[Message] = []
        self._router_loop = ToolLoop()

    # -- naming ----------------------------------------------------------------------------

    def _sid(self, name: str) -> str:
        return self.ctx.session_id if name == self.graph.entry else child_session_id(self.ctx.session_id, name)

    def _path(self, name: str) -> tuple[str, ...]:
        return self.ctx.path if name == self.graph.entry else (*self.ctx.path, name)

    def _ev(self) -> dict[str, Any]:
        return {"session_id": self.ctx.session_id, "path": self.ctx.path}

    # -- one visit -------------------------------------------------------------------------

    def _new_visit(self, node: HandoffNode) -> Visit:
        # A router node's own turn is a plain tool loop; a chain member runs the architecture
        # its HandoffChain wraps. Only a tool loop can call handoff tools: any other
        # architecture (a nested router...) runs on the agent as it is, as a final answer.
        arch = node.agent.architecture
        inner: Architecture = self._router_loop if node.is_router else (getattr(arch, "wraps", None) or arch)
        targets: dict[str, str] = {}
        if node.is_router and self.hooks is not None:
            targets = {t.name: t.name[len(CLASSIFY_PREFIX) :] for t in self.hooks.router_tools()}
        elif isinstance(inner, ToolLoop):
            targets = {f"{TRANSFER_PREFIX}{t}": t for t in node.targets}
        return Visit(node, inner, targets, set())

    def _tools(self, visit: Visit) -> list[Tool]:
        node, g = visit.node, self.graph

        def check(outcome: ToolOutcome) -> ToolOutcome:
            assert outcome.handoff is not None
            h = outcome.handoff
            name = g.resolve(h.target)
            if name is not None:
                return replace(outcome, handoff=replace(h, target=name))
            visit.unknown += 1
            return self._unknown(visit, h.target, outcome)

        tools: list[Tool] = [GuardedTool(t, check) for t in node.agent.tools]
        if node.is_router and self.hooks is not None:
            tools.extend(self.hooks.router_tools())
        else:
            tools.extend(transfer_tool(t, g.nodes[t].description) for t in visit.tool_targets.values())
        names = [t.name for t in tools]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise UsageError(f"agent {node.name!r} has a tool named like a generated handoff tool: {sorted(dup)}")
        visit.tool_names = set(names)
        return tools

    def _unknown(self, visit: Visit, requested: str, outcome: ToolOutcome | None) -> ToolOutcome:
        known = ", ".join(sorted(visit.tool_targets.values())) or "none"
        again = visit.unknown >= 2
        visit.notes.append(
            HandoffRejected(
                **self._ev(),
                from_agent=visit.node.name,
                to_agent=requested,
                why="unknown",
                reason=(
                    "unknown again: using the fallback" if again else "unknown target: the model may correct it once"
                ),
            )
        )
        if again and outcome is not None:
            return outcome
        return ToolOutcome(f"unknown handoff target {requested!r}; hand off to one of: {known}", is_error=True)

    def _input(
        self, visit: Visit, incoming: tuple[str, str | None, Any] | None
    ) -> tuple[str | None, tuple[Message, ...], str]:
        """``(instructions or None, history, prompt)`` of the visited agent's run."""
        ctx, node = self.ctx, visit.node
        if node.is_router and self.hooks is not None:
            back = (incoming[0], incoming[1]) if incoming is not None else None
            return self.hooks.router_turn(node.agent, ctx, back, self.context)
        if incoming is None:
            return None, ctx.history, ctx.prompt
        inp = HandoffInput(
            ctx.history, ctx.prompt, tuple(self.transcript), incoming[0], node.name, incoming[1], incoming[2]
        )
        return (None, *target_conversation(self.settings.history, inp))

    async def _visit(self, visit: Visit, incoming: tuple[str, str | None, Any] | None) -> AsyncGenerator[Event, None]:
        node, ctx = visit.node, self.ctx
        sid, path = self._sid(node.name), self._path(node.name)
        instructions, history, prompt = self._input(visit, incoming)
        temperature: float | None = None
        if node.is_router:
            temperature = node.agent.temperature if node.agent.temperature is not None else 0.0
        inner = visit.inner
        view = node.agent
        if isinstance(inner, ToolLoop):
            view = agent_view(
                node.agent,
                tools=self._tools(visit),
                architecture=inner,
                instructions=instructions,
                temperature=temperature,
            )
        own_run = (sid, path) != (ctx.session_id, ctx.path)
        first, reprompted = True, False
        while True:
            child = ctx.child(node.agent, session_id=sid, path=path, prompt=prompt, history=history)
            child.context, child._step = self.context, self.steps.get(sid, 0)
            mark = ctx.ledger.mark()  # what this turn spends, kept even if it is cut short
            visit.handoff_call = None
            cut = False
            try:
                async with aclosing(run_child(view, child, architecture=inner, announce=own_run)) as events:
                    async for ev in events:
                        yield ev
                        for extra in self._watch(ev, child, visit):
                            yield extra
                        if visit.unknown >= 2 and child.handoff is None:
                            cut = True  # the model named an unknown target twice: stop its turn now
                            break
            finally:
                self.steps[sid] = child._step
            self.context = child.context
            res = None if cut else child.result
            usage = res.usage if res is not None else ctx.ledger.since(mark, path)
            self.usage = self.usage + usage
            key = CLASSIFIER_KEY if node.is_router else node.name
            self.usage_by[key] = self.usage_by.get(key, Usage()) + usage
            if res is not None:
                self.transcript.extend(res.messages[1:] if first else res.messages)
            if res is None:
                res = RunResult(
                    output=None,
                    status="unresolved",
                    session_id=sid,
                    path=path,
                    usage=usage,
                    fallback_reason="unknown_route",
                )
            if cut:
                visit.failure = "unknown_route"
                return
            if child.handoff is not None:
                name = self.graph.resolve(child.handoff.target)
                if name is None:
                    visit.failure = "unknown_route"
                else:
                    visit.handoff = replace(child.handoff, target=name)
                return
            visit.result = res
            if res.status != "ok" or not self._announced(visit, res.output or ""):
                return
            if reprompted:
                yield HandoffRejected(
                    **self._ev(),
                    from_agent=node.name,
                    to_agent=self.graph.fallback or "",
                    why="no_handoff",
                    reason="announced a handoff again without a tool call",
                )
                visit.failure = "no_handoff"
                return
            yield HandoffRejected(
                **self._ev(),
                from_agent=node.name,
                to_agent="",
                why="no_handoff",
                reason="replied without calling a handoff tool: asking once more",
            )
            reprompted, first = True, False
            history, prompt = (*history, *res.messages), self._corrective(visit)

    def _announced(self, visit: Visit, text: str) -> bool:
        if visit.node.is_router:
            return True  # a router's only job is to call a classify tool
        detect = self.settings.detect_announced
        return bool(visit.tool_targets) and detect is not None and detect(text, tuple(visit.tool_targets.values()))

    @staticmethod
    def _corrective(visit: Visit) -> str:
        tools = ", ".join(visit.tool_targets)
        if visit.node.is_router:
            return f"You replied without calling a tool. Your only job is to call exactly one of: {tools}. Call it now."
        return (
            f"You said you would hand the conversation on, but you called no tool. To hand off, call one of: "
            f"{tools}. Otherwise answer the user's request yourself."
        )

    def _watch(self, ev: Event, child: RunContext, visit: Visit) -> list[Event]:
        """Handoff events for one of the visited agent's own tool results."""
        if not isinstance(ev, ToolResult) or ev.path != child.path or ev.session_id != child.session_id:
            return []
        out: list[Event] = []
        if child.handoff is not None:
            # The first result after the handoff was set is the handoff's own; the tool loop
            # answers every later call of that turn "ignored".
            if visit.handoff_call is None:
                visit.handoff_call = ev.call_id
            elif ev.call_id != visit.handoff_call and ev.tool in visit.tool_targets:
                out.append(
                    HandoffRejected(
                        **self._ev(),
                        from_agent=visit.node.name,
                        to_agent=visit.tool_targets[ev.tool],
                        why="duplicate",
                        reason=f"ignored: this turn already handed off to {child.handoff.target}",
                    )
                )
        elif ev.is_error and ev.tool not in visit.tool_names and ev.tool.startswith((TRANSFER_PREFIX, CLASSIFY_PREFIX)):
            visit.unknown += 1
            requested = ev.tool.removeprefix(TRANSFER_PREFIX).removeprefix(CLASSIFY_PREFIX)
            self._unknown(visit, requested, None)
        out.extend(visit.notes)
        visit.notes.clear()
        return out
