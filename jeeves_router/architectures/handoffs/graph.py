"""The agents a handoff chain can reach, and who may hand off to whom.

Built at the start of each run from the entry agent, the routes (for a handoff router) and
every ``Agent(handoffs=[...])`` reachable from them. A handoff may name an agent object or
an agent's name (a string resolves against the chain, so cycles can be declared:
``Agent(..., handoffs=["triage"])``). Each agent is a node under one name: its route name
when it is a route, else its own name. Two different agents under one name are refused.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...classify.parser import normalize_route_name
from ...errors import UsageError

if TYPE_CHECKING:
    from ...actor import Actor

__all__ = ["HandoffNode", "HandoffGraph", "build_graph", "describe_agent", "resolve_name"]


@dataclass(frozen=True, slots=True)
class HandoffNode:
    """One agent of a chain.

    Attributes:
        name: Its node name (route name or agent name).
        agent: The agent.
        description: What it handles (route description or its instructions' first line).
        targets: The nodes it may transfer to (its ``transfer_to_<name>`` tools).
        is_router: True for a handoff router's own classification node.
    """

    name: str
    agent: Actor
    description: str
    targets: tuple[str, ...]
    is_router: bool = False


@dataclass(frozen=True, slots=True)
class HandoffGraph:
    """The nodes of a chain, its entry node, and the fallback node (if any).

    ``plans`` is a cache for the chain's runs: how each node is visited (see
    :meth:`~jeeves_router.architectures.handoffs.state.ChainState._new_visit`), worked out
    once per node instead of once per visit.
    """

    nodes: Mapping[str, HandoffNode]
    entry: str
    fallback: str | None = None
    plans: dict[str, Any] = field(default_factory=dict, init=False, compare=False, repr=False)

    def resolve(self, target: str) -> str | None:
        """The node called ``target`` (exactly, else case- and separator-insensitively)."""
        return resolve_name(self.nodes, target)


def resolve_name(names: Iterable[str], target: str) -> str | None:
    """The one of ``names`` that ``target`` names: exactly, else by :func:`normalize_route_name`.

    The rule every route and agent name is matched by (a handoff's target, ``force_route``):
    case, and runs of ``-``, ``_`` and spaces, do not matter. ``None`` when none matches.
    """
    names = list(names)
    if target in names:
        return target
    key = normalize_route_name(target)
    for name in names:
        if normalize_route_name(name) == key:
            return name
    return None


def describe_agent(agent: Actor) -> str:
    """The first non-empty line of ``agent``'s instructions (at most 200 characters)."""
    for line in agent.instructions.splitlines():
        if line.strip():
            return line.strip()[:200]
    return ""


def build_graph(
    entry: Actor,
    *,
    entry_name: str | None = None,
    routes: Sequence[tuple[str, Actor, str]] = (),
    router: bool = False,
    hand_back: bool = False,
    fallback: str | None = None,
) -> HandoffGraph:
    """Collect the chain reachable from ``entry`` (and ``routes``).

    Args:
        entry: The agent the run starts with.
        entry_name: Its node name (default: its agent name).
        routes: ``(name, agent, description)`` of a handoff router's routes.
        router: True when ``entry`` is a handoff router (it classifies, it has no transfers).
        hand_back: Give every other node a ``transfer_to_<entry>`` tool.
        fallback: A node name to fall back to; it must be in the chain.

    Raises:
        UsageError: for two agents under one name, a handoff that is neither an agent nor
            a name, a name that no agent of the chain has, or an unknown fallback.
    """
    start = entry_name or entry.name
    agents: dict[str, Actor] = {}
    descriptions: dict[str, str] = {}
    by_id: dict[int, str] = {}
    raw: dict[str, list[str]] = {}

    def add(name: str, agent: Actor, description: str) -> str:
        if not hasattr(agent, "_events"):
            raise UsageError(f"handoff target {name!r} must be an Agent or an agent name, got {type(agent).__name__}")
        if name in agents:
            if agents[name] is not agent:
                raise UsageError(
                    f"two different agents are both called {name!r} in one handoff chain; give one another name"
                )
            return name
        agents[name] = agent
        descriptions[name] = description or describe_agent(agent)
        by_id.setdefault(id(agent), name)
        return name

    add(start, entry, "" if router else describe_agent(entry))
    for name, agent, description in routes:
        add(name, agent, description)
    queue = list(agents)
    while queue:
        name = queue.pop(0)
        agent = agents[name]
        if router and name == start:
            continue
        raw[name] = []
        for h in getattr(agent, "handoffs", ()):
            if isinstance(h, str):
                raw[name].append(h)
                continue
            known = by_id.get(id(h))
            if known is None:
                known = add(getattr(h, "name", "?"), h, "")
                queue.append(known)
            raw[name].append(known)
    nodes: dict[str, HandoffNode] = {}
    for name, agent in agents.items():
        targets: list[str] = []
        for t in raw.get(name, ()):
            resolved = resolve_name(agents, t)
            if resolved is None:
                raise UsageError(
                    f"agent {name!r} hands off to {t!r}, which is not an agent of this chain; "
                    f"known: {', '.join(agents)}"
                )
            if resolved != name and resolved not in targets:
                targets.append(resolved)
        if hand_back and name != start and start not in targets:
            targets.append(start)
        nodes[name] = HandoffNode(name, agent, descriptions[name], tuple(targets), is_router=router and name == start)
    graph = HandoffGraph(nodes, start, fallback)
    if fallback is not None and graph.resolve(fallback) != fallback:
        raise UsageError(f"fallback {fallback!r} is not an agent of this chain; known: {', '.join(nodes)}")
    return graph
