"""What a Router refuses at construction because it would otherwise be silently ignored.

* ``tools=`` / ``handoffs=`` on the agent that holds the Router: that agent only classifies
  and dispatches (its "handoffs" are its routes), so they would never be used (the shared
  check of :mod:`..checks`, which Capabilities uses too).
* A routed specialist's own ``HandoffChain(fallback=..., max_handoffs=...)`` options: a
  Router runs the handoffs of all its routes as one chain under its own settings (one
  ``max_handoffs`` budget and one fallback per run), so a different value on a specialist
  would be replaced. The same value, or the chain's defaults, are fine. That includes a sticky
  specialist's own ``session_store``: a Router keeps one store, which chooses the agent of a
  session's follow-up turn before any specialist runs, so two specialists with different
  stores cannot both be honoured; the Router's own store (the same object) is fine.

And per run (:func:`forced_route`): a ``force_route`` that names no declared route.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ...errors import UsageError
from ..checks import check_unused_agent_options
from ..handoffs.chain import HandoffChain
from ..handoffs.graph import resolve_name

if TYPE_CHECKING:
    from ...actor import Actor
    from .router import Router

__all__ = ["check_router_agent", "check_chain_options", "forced_route"]


def check_router_agent(agent: Actor) -> None:
    """Refuse ``tools=`` and ``handoffs=`` on a router agent, saying where they belong.

    Raises:
        UsageError: naming the option and what to do instead.
    """
    check_unused_agent_options(
        agent,
        role="router agent",
        tools_instead="a Router's agent only classifies and dispatches; give the tools to the specialists that "
        "need them (Agent(..., tools=[...]) of a route)",
        handoffs_instead="a Router dispatches to its routes; make each target a RouterRoute(name, agent, "
        "description), or give the handoffs to a specialist (hand_back=True lets specialists hand a request "
        "back to the router)",
    )


def check_chain_options(router: Router, agents: Iterable[Actor]) -> None:
    """Refuse a specialist whose ``HandoffChain`` sets an option the Router would replace.

    Raises:
        UsageError: naming the agent, the option, both values and what to do instead.
    """
    s = router.settings
    theirs: dict[str, object] = {
        "fallback": router.fallback_route,
        "max_handoffs": s.max_handoffs,
        "max_edge_traversals": s.max_edge_traversals,
        "history": s.history,
        "detect_announced": s.detect_announced,
        "sticky": s.store is not None,
        "session_store": s.store,
    }
    router_name = {"fallback": "fallback_route"}
    for agent in agents:
        arch = getattr(agent, "architecture", None)
        if not isinstance(arch, HandoffChain):
            continue
        for name, value in arch.options().items():
            if name == "session_store" and value is not theirs[name]:
                raise UsageError(
                    f"agent {agent.name!r} runs behind a Router with HandoffChain(session_store={_store(value)}), "
                    f"but a Router keeps its routes' sticky sessions in one store of its own (session_store="
                    f"{_store(theirs[name])}), which picks the agent of a follow-up turn, so this store would be "
                    "ignored; pass the one store to Router(session_store=...) and drop it from the specialists' "
                    "HandoffChain (or give every specialist that same store)"
                )
            if name != "session_store" and value != theirs[name]:
                option = router_name.get(name, name)
                raise UsageError(
                    f"agent {agent.name!r} runs behind a Router with HandoffChain({name}={value!r}), but a Router "
                    f"runs all its routes' handoffs as one chain under its own settings ({option}="
                    f"{theirs[name]!r}), so this option would be ignored; set Router({option}=...) instead, "
                    f"or drop it from the specialist's HandoffChain"
                )


def forced_route(router: Router, agent: Actor, name: object) -> str:
    """The declared route ``force_route=name`` picks, matched as route names are everywhere.

    Case and separators do not matter (:func:`~jeeves_router.architectures.handoffs.graph.resolve_name`,
    the rule of the parser, the classify tools and handoff targets): ``"Billing"`` picks ``billing``.

    Raises:
        UsageError: for a name that is no declared route (saying so when it names an agent
            reached only by a handoff), listing the declared routes.
    """
    routes = router.routes_by_name
    found = resolve_name(routes, name) if isinstance(name, str) else None
    if found is not None:
        return found
    graph = router.graph(agent)
    node = graph.resolve(name) if isinstance(name, str) else None
    why = "is not a declared route"
    if node is not None and not graph.nodes[node].is_router:  # reachable only through a transfer
        why += " but a handoff target (a route's agent hands the turn to it; force_route picks a route)"
    raise UsageError(
        f"force_route {name!r} {why}; pass one of the declared routes of {agent.name!r}: {', '.join(routes)}",
        argument="force_route",
    )


def _store(store: object) -> str:
    """A session store as a message names it: its type and identity (two in-memory stores differ)."""
    return f"{type(store).__name__} at {id(store):#x}"
