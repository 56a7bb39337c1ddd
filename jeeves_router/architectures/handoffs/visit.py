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

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

from ..._frozen import constructor
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
    #: A plain turn started by :meth:`VisitRunner._visit` whose outcome :meth:`VisitRunner._settle` reads.
    child: RunContext | None = None
    mark: int = 0


_new_visit = constructor(Visit)  # a visit per agent a chain visits, built without type.__call__


class VisitRunner:
    """Runs visits and keeps what a chain accumulates across them (context, usage, transcript)."""

    # slots: one allocation per run (an instance dict would be a second one)
    __slots__ = (
        "_sids",
        "accepted",
        "agent",
        "confidence",
        "context",
        "ctx",
        "fallback_reason",
        "graph",
        "settings",
        "steps",
        "sticky",
        "transcript",
        "usage",
        "usage_by",
        "visited",
    )

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
        # The chain's own state (see ChainRun), set here: one __init__ per run instead of one per class.
        # Flat tuples of strings, not lists, dicts or nested tuples: the collector untracks them, so
        # an in-flight run holds no GC-tracked container for them (an edge's traversals are
        # counted from ``accepted``: at most max_handoffs entries).
        self.accepted: tuple[str | None, ...] = ()  # from, to, reason, from, to, reason... per handoff
        self.visited: tuple[str, ...] = ()
        self.confidence: float | None = None
        self.fallback_reason: FallbackReason | None = None
        self.sticky = False

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
        # Worked out once per node of the graph (again if the agent's architecture changed).
        arch = node.agent.architecture
        plan = self.graph.plans.get(node.name)
        if plan is None or plan[0] is not node or plan[1] is not arch:
            inner: Architecture = getattr(arch, "wraps", None) or arch
            targets = {f"{TRANSFER_PREFIX}{t}": t for t in node.targets} if isinstance(inner, ToolLoop) else {}
            plan = self.graph.plans[node.name] = (node, arch, inner, targets)
        return _new_visit(node, plan[2], plan[3], _NO_NAMES)

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

    def _input(self, visit: Visit, incoming: tuple[str, str | None, Any] | None) -> tuple[tuple[Message, ...], str]:
        """``(history, prompt)`` of the visited agent's run."""
        ctx = self.ctx
        if incoming is None or (self.settings.history == "all" and not self.transcript):
            return ctx.history, ctx.prompt  # what "all" gives when no agent has spoken yet
        inp = HandoffInput(
            ctx.history, ctx.prompt, self.transcript, incoming[0], visit.node.name, incoming[1], incoming[2]
        )
        return target_conversation(self.settings.history, inp)

    def _escalates(self) -> bool:
        """Whether a visited agent's recovery may re-raise what it cannot act on (a chain passes failures on)."""
        return self.ctx.escalate

    def _visit(self, visit: Visit, incoming: tuple[str, str | None, Any] | None) -> Awaitable[None]:
        """Start the visited agent's turn; after awaiting it, :meth:`_settle` leaves its outcome on ``visit``.

        The agent's events go straight to the consumer (``execute``). An agent with nothing
        to hand off to runs as it is: what is returned is its run itself, so no coroutine
        layer sits between the chain and the agent's run. Only an agent that can hand off
        runs in :meth:`_turns`, which reads its events on the way (through :func:`run_child`)
        to watch its tool results for handoffs, and re-prompts an announced handoff once.
        """
        if visit.tool_targets:
            return self._turns(visit, incoming)
        node, ctx = visit.node, self.ctx
        name = node.name
        own_run = name != self.graph.entry  # the entry runs under the chain's own session and path
        sid, path = (self._sid(name), (*ctx.path, name)) if own_run else (ctx.session_id, ctx.path)
        history, prompt = self._input(visit, incoming)
        child = ctx.child(node.agent, session_id=sid, path=path, prompt=prompt, history=history)
        child.context, child._step, child.escalate = self.context, self.steps.get(sid, 0), self._escalates()
        visit.child, visit.mark = child, ctx.ledger.mark()  # what this turn spends, kept even if it is cut short
        inner = None if visit.inner is node.agent.architecture else visit.inner
        return execute(node.agent, child, architecture=inner, announce=own_run)

    def _settle(self, visit: Visit) -> None:
        """Read the outcome of the plain turn :meth:`_visit` started (nothing to do for any other visit)."""
        child = visit.child
        if child is not None:
            visit.child = None
            self._outcome(visit, child, visit.mark, cut=False, first=True)

    def _outcome(self, visit: Visit, child: RunContext, mark: int, *, cut: bool, first: bool) -> RunResult | None:
        """Take one finished turn into the chain (steps, context, usage, transcript) and settle its outcome.

        Returns the turn's result (``visit.result``) unless it handed off or was cut short.
        """
        name = visit.node.name
        self.steps[child.session_id] = child._step
        self.context = child.context
        res = None if cut else child.result
        usage = res.usage if res is not None else self.ctx.ledger.since(mark, child.path)
        self.usage = self.usage + usage
        by = self.usage_by
        by[name] = by[name] + usage if name in by else usage
        if res is not None:
            self.transcript = (*self.transcript, *(res.messages[1:] if first else res.messages))
        if cut:
            visit.failure = "unknown_route"
            return None
        if child.handoff is not None:
            target = self.graph.resolve(child.handoff.target)
            if target is None:
                visit.failure = "unknown_route"
                if not visit.tool_targets:  # a watched turn reported it already (``_watch``)
                    self._rejected_plain(visit, child.handoff.target)
            else:
                visit.handoff = replace(child.handoff, target=target)
            return None
        if res is None:  # an architecture that ended without a result
            res = RunResult(
                output=None,
                status="unresolved",
                session_id=child.session_id,
                path=child.path,
                usage=usage,
                fallback_reason="unknown_route",
            )
        visit.result = res
        return res

    def _rejected_plain(self, visit: Visit, requested: str) -> None:
        """Note the unknown target of a tool's handoff in a turn that had no handoff tools to correct it."""
        fallback = self.graph.fallback if self.graph.fallback != visit.node.name else None
        where = f"using the fallback {fallback!r}" if fallback is not None else "no fallback: the run ends unresolved"
        visit.notes = (
            *visit.notes,
            HandoffRejected(
                **self._ev(),
                from_agent=visit.node.name,
                to_agent=requested,
                why="unknown",
                reason=f"a tool handed off to an unknown target; {where}",
            ),
        )

    async def _turns(self, visit: Visit, incoming: tuple[str, str | None, Any] | None) -> None:
        """The turn of an agent that can hand off, watched, with one corrective re-prompt."""
        node, ctx = visit.node, self.ctx
        sid, path = self._sid(node.name), self._path(node.name)
        history, prompt = self._input(visit, incoming)
        view = agent_view(node.agent, tools=self._tools(visit), architecture=visit.inner)
        own_run = (sid, path) != (ctx.session_id, ctx.path)
        first, reprompted = True, False
        while True:
            child = ctx.child(node.agent, session_id=sid, path=path, prompt=prompt, history=history)
            child.context, child._step, child.escalate = self.context, self.steps.get(sid, 0), self._escalates()
            mark = ctx.ledger.mark()  # what this turn spends, kept even if it is cut short
            visit.handoff_call = None
            try:
                cut = await self._watched(view, child, visit.inner, own_run, visit)
            finally:
                self.steps[sid] = child._step
            res = self._outcome(visit, child, mark, cut=cut, first=first)
            if res is None or res.status != "ok" or not self._announced(visit, res.output or ""):
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

    async def _watched(self, view: Actor, child: RunContext, inner: Architecture, own_run: bool, visit: Visit) -> bool:
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
