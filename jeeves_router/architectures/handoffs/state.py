"""What a handoff chain keeps across its visits, and how a finished turn is taken in.

:class:`ChainSettings` holds a chain's guards and choices, :class:`Visit` one agent's turn
and its outcome, and :class:`ChainState` what a run accumulates across turns (context,
usage, transcript, session ids, steps): a turn's input (``history``) comes from it, and
each finished turn is added to it (:meth:`ChainState._outcome`). How a turn runs is in
:mod:`.visit`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ..._frozen import constructor
from ...events import Event, HandoffRejected
from ...ids import child_session_id
from ...messages import Message
from ...results import FallbackReason, RunResult
from ...tools import Handoff
from ...usage import NO_USAGE, Usage
from ..base import Architecture, RunContext
from ..react import ToolLoop
from .graph import HandoffGraph, HandoffNode
from .session import SessionStore
from .tools import TRANSFER_PREFIX, HandoffInput, HistoryMode, declares_handoff, target_conversation

if TYPE_CHECKING:
    from ...actor import Actor

__all__ = ["ChainSettings", "ChainState", "Visit"]

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
    unknown: int = 0
    notes: tuple[Event, ...] = ()
    # outcome
    result: RunResult | None = None
    handoff: Handoff | None = None
    failure: FallbackReason | None = None
    #: Go on at this node without a handoff (no guard, no event): a router's reclassification.
    redirect: str | None = None
    #: A plain turn started by :meth:`.VisitRunner._visit` whose outcome :meth:`ChainState._settle` reads.
    child: RunContext | None = None
    mark: int = 0


_new_visit = constructor(Visit)  # a visit per agent a chain visits, built without type.__call__


class ChainState:
    """What one run of a chain keeps across its visits (context, usage, transcript), and its turns' bookkeeping."""

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

    def _settle(self, visit: Visit) -> None:
        """Read the outcome of the plain turn :meth:`.VisitRunner._visit` started (nothing to do otherwise)."""
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
            if not visit.tool_targets:  # a watched turn reported each as its result came (``_watch``)
                for call in child.ignored:
                    self._note(visit, self._ignored(visit, child, call.name))
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
        if res.status == "critical" and child.failure is not None:
            # the member's recovery stopped it and its answer ends the chain: the chain's run stopped for it
            self.ctx.failure = child.failure
        visit.result = res
        return res

    def _ignored(self, visit: Visit, child: RunContext, tool: str) -> HandoffRejected | None:
        """The ``handoff.rejected`` of a call the tool loop ignored (its turn had handed off), if it hands off.

        The one report of a second handoff in a turn, whichever tool it called: a generated
        ``transfer_to_<agent>`` tool (its target named) or an agent's own tool declared to
        return a ``Handoff`` (never run, so its target is not known: ``to_agent`` is empty).
        Any other ignored call is no handoff: ``None``.
        """
        assert child.handoff is not None
        target = visit.tool_targets.get(tool)
        if target is None:
            own = visit.node.agent.tool_map.get(tool)
            if own is None or not declares_handoff(own):
                return None
            target = ""
        return HandoffRejected(
            **self._ev(),
            from_agent=visit.node.name,
            to_agent=target,
            why="duplicate",
            reason=f"ignored: this turn already handed off to {child.handoff.target}",
        )

    @staticmethod
    def _note(visit: Visit, event: Event | None) -> None:
        """Keep ``event`` (if any) for the chain to send after the turn."""
        if event is not None:
            visit.notes = (*visit.notes, event)

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
