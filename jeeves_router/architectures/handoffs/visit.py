"""One agent's turn inside a handoff chain: run as it is, or watched when it can hand off.

A visit runs the agent's own architecture (normally the tool loop) on a view of the agent
that also has the generated handoff tools, under the agent's session id; the agent's
events go straight to the consumer (``execute``, no re-yield). An agent with nothing to
hand off to runs as it is (its toolsets opened as for any run). An agent that can hand off
has its events read on the way (``run_child``), and the visit watches its tool results: a
call the tool loop ignored (an earlier call of the turn already handed off) is reported as
a ``duplicate`` when it hands off (a transfer tool, or an own tool declared ``-> Handoff``;
a plain turn's are reported after it); a call to a handoff tool that does not exist, or an own tool
returning a ``Handoff`` to an unknown target, is an ``unknown`` target the model may
correct once. A text reply that announces a handoff gets one corrective re-prompt.

A router's own node is never visited here: :class:`~jeeves_router.Router` classifies it
(``RouterRun``), with whatever classifier it has. What the chain keeps between turns, and how
a finished turn is taken in, is in :mod:`.state`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ...errors import UsageError
from ...events import Event, HandoffRejected, ToolResult
from ...tools import Tool, ToolOutcome
from ..base import Architecture, RunContext, execute, run_child
from .state import ChainSettings, ChainState, Visit
from .tools import CLASSIFY_PREFIX, TRANSFER_PREFIX, GuardedTool, agent_view, transfer_tool

if TYPE_CHECKING:
    from ...actor import Actor

__all__ = ["ChainSettings", "Visit", "VisitRunner"]


class VisitRunner(ChainState):
    """Runs visits: a plain turn as it is, a turn that can hand off watched (see the module docs)."""

    __slots__ = ()

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
        child.takes_handoff = True  # a tool's Handoff ends the turn: _settle reads it
        visit.child, visit.mark = child, ctx.ledger.mark()  # what this turn spends, kept even if it is cut short
        inner = None if visit.inner is node.agent.architecture else visit.inner
        return execute(node.agent, child, architecture=inner, announce=own_run)

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
        if again and outcome is not None:  # the turn ends on it (its handoff stays set): say where it goes
            fallback = self.graph.fallback if self.graph.fallback != visit.node.name else None
            where = "the conversation goes to the fallback" if fallback is not None else "no agent takes it"
            return replace(outcome, content=f"unknown handoff target {requested!r} again; {where}", is_error=True)
        return ToolOutcome(f"unknown handoff target {requested!r}; hand off to one of: {known}", is_error=True)

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
            child.takes_handoff = True
            mark = ctx.ledger.mark()  # what this turn spends, kept even if it is cut short
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
            # the tool loop answers every later call of the turn "ignored", noting it first
            if child.ignored and child.ignored[-1].id == ev.call_id:
                rejected = self._ignored(visit, child, ev.tool)
                if rejected is not None:
                    out.append(rejected)
        elif ev.is_error and ev.tool not in visit.tool_names and ev.tool.startswith((TRANSFER_PREFIX, CLASSIFY_PREFIX)):
            visit.unknown += 1
            requested = ev.tool.removeprefix(TRANSFER_PREFIX).removeprefix(CLASSIFY_PREFIX)
            self._unknown(visit, requested, None)
        out.extend(visit.notes)
        visit.notes = ()
        return out
