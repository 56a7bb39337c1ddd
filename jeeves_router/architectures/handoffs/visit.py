"""One agent's turn inside a handoff chain, and the state the chain keeps between turns.

A visit runs the agent's own architecture (normally the tool loop) on a view of the agent
that also has the generated handoff tools, under the agent's session id; the agent's
events go straight to the consumer (``execute``, no re-yield). An agent with nothing to
hand off to runs as it is (its toolsets opened as for any run). An agent that can hand off
has its events read on the way (``run_child``), and the visit watches its tool results: a
handoff call the tool loop ignored (an earlier call of the turn already handed off) is
reported as a ``duplicate``; a call to a handoff tool that does not exist, or an own tool
returning a ``Handoff`` to an unknown target, is an ``unknown`` target the model may
correct once. A text reply that announces a handoff gets one corrective re-prompt.

A router's own node is never visited here: :class:`~jeeves_router.Router` classifies it
(``RouterRun``), with whatever classifier it has.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

from ...errors import UsageError
from ...events import Event, HandoffRejected, ToolResult
from ...ids import child_session_id
from ...messages import Message
from ...results import FallbackReason, RunResult
from ...tools import Handoff, Tool, ToolOutcome
from ...usage import NO_USAGE, Usage
from ..base import Architecture, RunContext, execute, run_child
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

__all__ = ["ChainSettings", "Visit", "VisitRunner"]

T = TypeVar("T")

_NO_NAMES: frozenset[str] = frozenset()  # shared: a visit without handoff tools allocates no set


@dataclass(frozen=True, slots=True)
class ChainSettings:
    """The guards and choices of a handoff chain (see :class:`HandoffChain`)."""

    max_handoffs: int = 8
    max_edge_traversals: int = 2
    history: HistoryMode = "all"
    detect_announced: Callable[[str, Sequence[str]], bool] | None = None
    store: SessionStore | None = None


@dataclass(eq=False, slots=True)
class Visit:
    """One agent's turn (and its corrective re-prompt) within a chain."""

    node: HandoffNode
    inner: Architecture
    tool_targets: dict[str, str]
    tool_names: frozenset[str]
    handoff_call: str | None = None
    unknown: int = 0
    notes: tuple[Event, ...] = ()
    # outcome
    result: RunResult | None = None
    handoff: Handoff | None = None
    failure: FallbackReason | None = None
    #: Go on at this node without a handoff (no guard, no event): a router's reclassification.
    redirect: str | None = None


class VisitRunner:
    """Runs visits and keeps what a chain accumulates across them (context, usage, transcript)."""

    def __init__(
        self,
        graph: HandoffGraph,
        settings: ChainSettings,
        agent: Actor,
        ctx: RunContext,
    ) -> None:
        self.graph, self.settings, self.agent, self.ctx = graph, settings, agent, ctx
        self.context = ctx.context
        self.steps: dict[str, int] = {ctx.session_id: ctx._step}
        self.usage = NO_USAGE
        self.usage_by: dict[str, Usage] = {}
        self.transcript: tuple[Message, ...] = ()  # a tuple: no GC-tracked list per in-flight run
        self._sids: dict[str, str] = {}

    # -- naming ----------------------------------------------------------------------------

    def _sid(self, name: str) -> str:
        sid = self._sids.get(name)
        if sid is None:
            sid = self.ctx.session_id if name == self.graph.entry else child_session_id(self.ctx.session_id, name)
            self._sids[name] = sid
        return sid

    def _path(self, name: str) -> tuple[str, ...]:
        return self.ctx.path if name == self.graph.entry else (*self.ctx.path, name)

    def _ev(self) -> dict[str, Any]:
        return {"session_id": self.ctx.session_id, "path": self.ctx.path}

    # -- one visit -------------------------------------------------------------------------

    def _new_visit(self, node: HandoffNode) -> Visit:
        # A chain member runs the architecture its HandoffChain wraps. Only a tool loop can
        # call handoff tools: any other architecture (a nested router...) runs on the agent
        # as it is, as a final answer.
        arch = node.agent.architecture
        inner: Architecture = getattr(arch, "wraps", None) or arch
        targets: dict[str, str] = {}
        if isinstance(inner, ToolLoop):
            targets = {f"{TRANSFER_PREFIX}{t}": t for t in node.targets}
        return Visit(node, inner, targets, _NO_NAMES)

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
        tools.extend(transfer_tool(t, g.nodes[t].description) for t in visit.tool_targets.values())
        names = [t.name for t in tools]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise UsageError(f"agent {node.name!r} has a tool named like a generated handoff tool: {sorted(dup)}")
        visit.tool_names = frozenset(names)
        return tools

    def _unknown(self, visit: Visit, requested: str, outcome: ToolOutcome | None) -> ToolOutcome:
        known = ", ".join(sorted(visit.tool_targets.values())) or "none"
        again = visit.unknown >= 2
        visit.notes = (
            *visit.notes,
            HandoffRejected(
                **self._ev(),
                from_agent=visit.node.name,
                to_agent=requested,
                why="unknown",
                reason=(
                    "unknown again: using the fallback" if again else "unknown target: the model may correct it once"
                ),
            ),
        )
        if again and outcome is not None:
            return outcome
        return ToolOutcome(f"unknown handoff target {requested!r}; hand off to one of: {known}", is_error=True)

    def _input(
        self, visit: Visit, incoming: tuple[str, str | None, Any] | None
    ) -> tuple[str | None, tuple[Message, ...], str]:
        """``(instructions or None, history, prompt)`` of the visited agent's run."""
        ctx, node = self.ctx, visit.node
        if incoming is None or (self.settings.history == "all" and not self.transcript):
            return None, ctx.history, ctx.prompt  # what "all" gives when no agent has spoken yet
        inp = HandoffInput(ctx.history, ctx.prompt, self.transcript, incoming[0], node.name, incoming[1], incoming[2])
        return (None, *target_conversation(self.settings.history, inp))

    async def _visit(self, visit: Visit, incoming: tuple[str, str | None, Any] | None) -> None:
        """Run the visited agent's turn; its outcome is left on ``visit``.

        The agent's events go straight to the consumer (``execute``). Only an agent that can
        hand off has its events read on the way (through :func:`run_child`), to watch its
        tool results for handoffs.
        """
        node, ctx = visit.node, self.ctx
        sid, path = self._sid(node.name), self._path(node.name)
        instructions, history, prompt = self._input(visit, incoming)
        inner: Architecture | None = visit.inner
        view = node.agent
        if visit.tool_targets:
            view = agent_view(node.agent, tools=self._tools(visit), architecture=visit.inner, instructions=instructions)
        elif inner is node.agent.architecture:
            inner = None  # nothing to hand off to: the agent runs as itself, as a routed specialist does
        own_run = (sid, path) != (ctx.session_id, ctx.path)
        first, reprompted = True, False
        while True:
            child = ctx.child(node.agent, session_id=sid, path=path, prompt=prompt, history=history)
            child.context, child._step = self.context, self.steps.get(sid, 0)
            mark = ctx.ledger.mark()  # what this turn spends, kept even if it is cut short
            visit.handoff_call = None
            try:
                if visit.tool_targets:
                    cut = await self._watched(view, child, inner, own_run, visit)
                else:
                    await execute(view, child, architecture=inner, announce=own_run)
                    cut = False
            finally:
                self.steps[sid] = child._step
            self.context = child.context
            res = None if cut else child.result
            usage = res.usage if res is not None else ctx.ledger.since(mark, path)
            self.usage = self.usage + usage
            self.usage_by[node.name] = self.usage_by.get(node.name, NO_USAGE) + usage
            if res is not None:
                self.transcript = (*self.transcript, *(res.messages[1:] if first else res.messages))
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
            if res.status != "ok" or not visit.tool_targets or not self._announced(visit, res.output or ""):
                return
            if reprompted:
                await ctx.emit(
                    HandoffRejected(
                        **self._ev(),
                        from_agent=node.name,
                        to_agent=self.graph.fallback or "",
                        why="no_handoff",
                        reason="announced a handoff again without a tool call",
                    )
                )
                visit.failure = "no_handoff"
                return
            await ctx.emit(
                HandoffRejected(
                    **self._ev(),
                    from_agent=node.name,
                    to_agent="",
                    why="no_handoff",
                    reason="replied without calling a handoff tool: asking once more",
                )
            )
            reprompted, first = True, False
            history, prompt = (*history, *res.messages), self._corrective(visit)

    async def _watched(
        self, view: Actor, child: RunContext, inner: Architecture | None, own_run: bool, visit: Visit
    ) -> bool:
        """Run an agent that can hand off, watching its tool results; True when its turn was cut short."""
        emit = self.ctx.emit
        events = run_child(view, child, architecture=inner, announce=own_run)
        try:
            async for ev in events:
                await emit(ev)
                if not isinstance(ev, ToolResult):
                    continue  # only a tool result can hand off or name an unknown target
                for extra in self._watch(ev, child, visit):
                    await emit(extra)
                if visit.unknown >= 2 and child.handoff is None:
                    return True  # the model named an unknown target twice: stop its turn now
        finally:
            await events.aclose()
        return False

    def _announced(self, visit: Visit, text: str) -> bool:
        detect = self.settings.detect_announced
        return bool(visit.tool_targets) and detect is not None and detect(text, tuple(visit.tool_targets.values()))

    @staticmethod
    def _corrective(visit: Visit) -> str:
        tools = ", ".join(visit.tool_targets)
        return (
            f"You said you would hand the conversation on, but you called no tool. To hand off, call one of: "
            f"{tools}. Otherwise answer the user's request yourself."
        )

    def _watch(self, ev: ToolResult, child: RunContext, visit: Visit) -> Sequence[Event]:
        """Handoff events for one of the visited agent's own tool results."""
        if ev.path != child.path or ev.session_id != child.session_id:
            return ()
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
        visit.notes = ()
        return out
