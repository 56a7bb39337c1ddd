"""Handoff chains: an agent hands the conversation to another with a ``transfer_to_<agent>`` tool.

``Agent(..., handoffs=[billing, "triage"])`` runs with this architecture by default. The
agent and every agent reachable through ``handoffs`` get one ``transfer_to_<name>`` tool
per target; the chain follows the handoffs until an agent answers::

    triage = Agent("Send each request to the right desk.", name="triage", model=...,
                   handoffs=[billing, technical])
    result = await triage.run("I was charged twice")
    result.route                  # "billing": the agent that answered
    result.metadata["handoffs"]   # ({"from": "triage", "to": "billing", "reason": ...},)

To declare a cycle, name an agent instead of passing it (``handoffs=["triage"]``); names
resolve against the chain when a run starts.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any

from ...errors import UsageError
from ..base import Architecture, RunContext
from ..checks import check_run_request
from ..react import ToolLoop
from .graph import HandoffGraph, build_graph
from .run import ChainRun
from .session import InMemorySessionStore, SessionStore
from .tools import HistoryMode, announces_handoff, validate_history_mode
from .visit import ChainSettings

if TYPE_CHECKING:
    from ...actor import Actor

__all__ = ["HandoffChain", "chain_settings"]

Detector = Callable[[str, Sequence[str]], bool]


def chain_settings(
    *,
    max_handoffs: int,
    max_edge_traversals: int,
    history: HistoryMode,
    detect_announced: Detector | None,
    sticky: bool,
    session_store: SessionStore | None,
    owner: str,
) -> ChainSettings:
    """Check the shared chain options and bundle them.

    Args:
        max_handoffs: Most handoffs in one run.
        max_edge_traversals: How often one edge may be taken in one run.
        history: What a target sees.
        detect_announced: ``(text, targets) -> bool``, or ``None``.
        sticky: Whether sessions stick to the agent that answered them last.
        session_store: Where sticky sessions are kept (``None``: in memory).
        owner: The class the options were given to, as a message names it
            (``"HandoffChain"``, ``"Router"``).

    Raises:
        UsageError: for a non-positive limit, an unknown history mode, a detector that is
            not callable, a session store without ``get``/``set``/``delete``, or a session
            store without ``sticky=True`` (only sticky sessions are kept in it).
    """
    for label, value in (("max_handoffs", max_handoffs), ("max_edge_traversals", max_edge_traversals)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise UsageError(f"{label} must be a positive integer, got {value!r}")
    validate_history_mode(history)
    if detect_announced is not None and not callable(detect_announced):
        raise UsageError("detect_announced must be a callable(text, targets) -> bool or None")
    if session_store is not None and not isinstance(session_store, SessionStore):
        raise UsageError(f"session_store must have async get/set/delete methods, got {type(session_store).__name__}")
    if session_store is not None and not sticky:
        raise UsageError(
            f"{owner}(session_store={type(session_store).__name__}(...)) was given without sticky=True, but only "
            "sticky sessions (the agent that answered a session last) are kept in a session store, so this store "
            "would be ignored; pass sticky=True to keep them there, or drop session_store"
        )
    store = (session_store if session_store is not None else InMemorySessionStore()) if sticky else None
    return ChainSettings(max_handoffs, max_edge_traversals, history, detect_announced, store)


class HandoffChain:
    """Run an agent and follow its handoffs (the default architecture of ``Agent(handoffs=...)``).

    Args:
        wraps: The architecture each agent's own turn uses when that agent has no other
            (default: :class:`ToolLoop`).
        fallback: Name of the agent that takes over when a target is unknown twice, or an
            agent announces a handoff twice without calling a tool (``None``: the run ends
            ``unresolved``).
        max_handoffs: Most handoffs in one run; one more ends it with ``handoff_limit``.
        max_edge_traversals: How often one edge (from, to) may be taken in one run; one
            more ends it with ``handoff_cycle`` (catches A→B→C→A as well as A→B→A).
        history: What a target sees: ``"all"``, ``"last"`` or a callable (see
            :class:`~jeeves_router.architectures.handoffs.tools.HandoffInput`).
        detect_announced: ``(text, targets) -> bool``: does a text reply announce a handoff?
            ``None`` disables the check.
        sticky: Remember per session id which agent answered last and start the next turn
            there (reset with ``options={"reset_sticky": True}`` or :meth:`reset`).
        session_store: Where sticky sessions are kept (default: in memory); only with
            ``sticky=True`` (refused otherwise: it would be ignored).
    """

    def __init__(
        self,
        wraps: Architecture | None = None,
        *,
        fallback: str | None = None,
        max_handoffs: int = 8,
        max_edge_traversals: int = 2,
        history: HistoryMode = "all",
        detect_announced: Detector | None = announces_handoff,
        sticky: bool = False,
        session_store: SessionStore | None = None,
    ) -> None:
        if wraps is not None and (isinstance(wraps, HandoffChain) or not hasattr(wraps, "run")):
            raise UsageError(f"wraps must be an architecture other than HandoffChain, got {type(wraps).__name__}")
        self.wraps: Architecture = wraps if wraps is not None else ToolLoop()
        self.fallback = fallback
        self.settings = chain_settings(
            max_handoffs=max_handoffs,
            max_edge_traversals=max_edge_traversals,
            history=history,
            detect_announced=detect_announced,
            sticky=sticky,
            session_store=session_store,
            owner="HandoffChain",
        )
        self.session_store = session_store  # the store given (None: the default; refused unless sticky)

    def options(self) -> dict[str, object]:
        """The options given to this chain that differ from their defaults (name: value).

        A :class:`~jeeves_router.Router` runs its routes' handoffs as one chain under its own
        settings; it refuses a routed specialist whose chain sets one of these otherwise.
        """
        s = self.settings
        given: dict[str, object] = {}
        for name, value, default in (
            ("fallback", self.fallback, None),
            ("max_handoffs", s.max_handoffs, 8),
            ("max_edge_traversals", s.max_edge_traversals, 2),
            ("history", s.history, "all"),
            ("detect_announced", s.detect_announced, announces_handoff),
            ("sticky", s.store is not None, False),
            ("session_store", self.session_store, None),
        ):
            if value != default:
                given[name] = value
        return given

    def validate(self, agent: Actor) -> None:
        """Check the wrapped architecture fits ``agent`` (handoff names resolve per run)."""
        self.wraps.validate(agent)

    def graph(self, agent: Actor) -> HandoffGraph:
        """The chain reachable from ``agent``.

        Raises:
            UsageError: see :func:`~jeeves_router.architectures.handoffs.graph.build_graph`.
        """
        return build_graph(agent, fallback=self.fallback)

    def prepare(self, agent: Actor, ctx: RunContext) -> None:
        """Resolve the chain before the run starts, so naming mistakes fail early."""
        check_run_request(
            agent, ctx, options=("reset_sticky",), no_routes="a handoff chain, which starts with its own agent"
        )
        self.graph(agent)

    async def reset(self, session_id: str) -> None:
        """Forget which agent answered ``session_id`` last (sticky chains only)."""
        if self.settings.store is not None:
            await self.settings.store.delete(session_id)

    def run(self, agent: Actor, ctx: RunContext) -> Coroutine[Any, Any, None]:
        """Visit agents until one answers; emits the handoff events (every agent emits its own)."""
        return ChainRun(self.graph(agent), self.settings, agent, ctx).run()
