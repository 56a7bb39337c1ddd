"""The agent graph: which agents, routes, handoffs and capabilities an agent tree has.

:func:`agent_graph` walks an agent and everything it can hand work to — a router's routes
(with the threshold, the classifier and the fallback), handoff targets (``handoffs=[...]``,
named or as objects; a Router's hand-back edges), and capabilities (with
the context types they require and provide) — and returns plain nodes and edges.
:meth:`AgentGraph.mermaid` renders them as a Mermaid flowchart::

    print(desk.graph())          # the same as agent_graph(desk).mermaid()

Each agent object is one node, however many routes lead to it, so cycles terminate. A
handoff given by name points at the agent of that name in the tree (or at a dashed
placeholder when none is there).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from .architectures.capabilities import Capabilities
from .architectures.handoffs import HandoffChain
from .architectures.router import HandoffRouter, Router
from .classify.cascade import CascadeClassifier
from .classify.llm import LLMClassifier
from .classify.toolcall import ToolCallClassifier

if TYPE_CHECKING:
    from .actor import Actor

__all__ = ["AgentGraph", "GraphEdge", "GraphNode", "agent_graph", "tree_agents"]

NodeKind = Literal["agent", "router", "capability", "function", "unknown"]
EdgeKind = Literal["route", "fallback", "handoff", "hand_back", "capability", "handler", "data"]


@dataclass(frozen=True, slots=True)
class GraphNode:
    """One node: an agent, a capability, a capability's function handler, or a named agent not in the tree."""

    id: str
    name: str
    kind: NodeKind
    details: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class GraphEdge:
    """One edge from ``source`` to ``target`` (node ids); ``label`` is shown on it."""

    source: str
    target: str
    kind: EdgeKind
    label: str = ""


@dataclass(frozen=True, slots=True)
class AgentGraph:
    """Nodes and edges of an agent tree; ``root`` is the id of the agent it was built from."""

    root: str
    nodes: tuple[GraphNode, ...]
    edges: tuple[GraphEdge, ...]

    def node(self, name: str) -> GraphNode:
        """The first node called ``name`` (KeyError if none)."""
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    def mermaid(self) -> str:
        """The graph as a Mermaid ``flowchart TD`` (paste it into any Mermaid renderer)."""
        lines = ["flowchart TD"]
        for n in self.nodes:
            label = _text("<br/>".join((f"<b>{_html(n.name)}</b>", *(_html(d) for d in n.details))))
            open_, close = _SHAPES[n.kind]
            lines.append(f'    {n.id}{open_}"{label}"{close}')
        for e in self.edges:
            arrow = _ARROWS[e.kind]
            label = f'|"{_text(_html(e.label))}"|' if e.label else ""
            lines.append(f"    {e.source} {arrow}{label} {e.target}")
        for kind, style in _CLASSES.items():
            ids = [n.id for n in self.nodes if n.kind == kind]
            if ids:
                lines.append(f"    classDef {kind} {style}")
                lines.append(f"    class {','.join(ids)} {kind}")
        return "\n".join(lines) + "\n"


_SHAPES: dict[str, tuple[str, str]] = {
    "agent": ("[", "]"),
    "router": ("{{", "}}"),
    "capability": ("([", "])"),
    "function": ("[[", "]]"),
    "unknown": ("[/", "/]"),
}
_ARROWS = {
    "route": "-->",
    "fallback": "-.->",
    "handoff": "==>",
    "hand_back": "-.->",
    "capability": "-->",
    "handler": "-->",
    "data": "-.->",
}
_CLASSES = {
    "router": "fill:#e8f0fe,stroke:#3367d6",
    "capability": "fill:#fef7e0,stroke:#b06000",
    "unknown": "stroke-dasharray:4 3",
}


def _html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _text(text: str) -> str:
    return text.replace('"', "#quot;")


def _model_name(model: Any) -> str | None:
    if model is None:
        return None
    return model if isinstance(model, str) else str(getattr(model, "name", type(model).__name__))


def _router_classifier(arch: Router) -> list[str]:
    """The detail lines saying which classifier ``arch`` decides with (:func:`_classifier`)."""
    classifier = getattr(arch, "_classifier", None)
    if classifier is None:  # built at the first run, on the router agent's model
        kind = ToolCallClassifier if isinstance(arch, HandoffRouter) else LLMClassifier
        return [f"classifier: {kind.__name__} (the agent's model)"]
    return _classifier(classifier, "classifier")


def _classifier(classifier: object, label: str) -> list[str]:
    """``label: Type (what is cheaply known of it)``, and a cascade's stages on lines of their own."""
    kind = type(classifier).__name__
    if isinstance(classifier, CascadeClassifier):
        within = "" if label == "classifier" else f"{label}, "
        return [
            f"{label}: {kind} (first stage taken at confidence ≥ {classifier.accept_above:g})",
            *_classifier(classifier.first, f"{within}first stage"),
            *_classifier(classifier.second, f"{within}second stage"),
        ]
    if isinstance(classifier, (LLMClassifier, ToolCallClassifier)):
        return [f"{label}: {kind} (model {_model_name(classifier.model)})"]
    embedding = sys.modules.get("jeeves_router.classify.embedding.classifier")  # never imported (numpy) just for this
    if embedding is not None and isinstance(classifier, embedding.EmbeddingClassifier):
        threshold = "none" if classifier.threshold is None else f"{classifier.threshold:g}"
        return [
            f"{label}: {kind} (encoder {classifier.encoder.name}, scorer {classifier.scorer.kind}, "
            f"threshold {threshold})"
        ]
    return [f"{label}: {kind}"]


@dataclass
class _Builder:
    nodes: list[GraphNode] = field(default_factory=list)
    edges: list[GraphEdge] = field(default_factory=list)
    ids: dict[int, str] = field(default_factory=dict)  # id(agent or capability) -> node id
    by_name: dict[str, str] = field(default_factory=dict)  # agent name -> node id
    named: list[tuple[str, str, EdgeKind, str]] = field(default_factory=list)  # edges to agents given by name
    taken: set[str] = field(default_factory=set)
    seen: list[Actor] = field(default_factory=list)  # every agent visited, in order

    def new_id(self, name: str) -> str:
        base = re.sub(r"\W", "_", name) or "node"
        nid, n = base, 2
        while nid in self.taken or nid in {"end", "graph", "subgraph", "class", "style", "click"}:
            nid, n = f"{base}_{n}", n + 1
        self.taken.add(nid)
        return nid

    def agent(self, agent: Actor) -> str:
        known = self.ids.get(id(agent))
        if known is not None:
            return known
        nid = self.new_id(agent.name)
        self.ids[id(agent)] = nid
        self.seen.append(agent)
        self.by_name.setdefault(agent.name, nid)
        arch = agent.architecture
        details: list[str] = [type(arch).__name__]
        model = _model_name(agent.model)
        kind: NodeKind = "router" if isinstance(arch, Router) else "agent"
        if isinstance(arch, Router):
            details.extend(_router_classifier(arch))
        if model:
            details.append(f"model: {model}")
        if isinstance(arch, Router):
            details.append(f"threshold: {arch.threshold:g}")
            details.append(f"fallback: {arch.fallback_route or 'none (unresolved)'}")
        if agent.tools:
            details.append("tools: " + ", ".join(t.name for t in agent.tools))
        index = len(self.nodes)
        self.nodes.append(GraphNode(nid, agent.name, kind))
        self._architecture(nid, agent, arch)
        for h in agent.handoffs:
            if isinstance(h, str):
                self.named.append((nid, h, "handoff", "handoff"))
            else:
                self.edges.append(GraphEdge(nid, self.agent(h), "handoff", "handoff"))
        self.nodes[index] = GraphNode(nid, agent.name, kind, tuple(details))
        return nid

    def _architecture(self, nid: str, agent: Actor, arch: Any) -> None:
        if isinstance(arch, Router):
            for route in arch.routes:
                target = self.agent(route.agent)
                label = route.name if route.name == route.agent.name else f"{route.name} → {route.agent.name}"
                self.edges.append(GraphEdge(nid, target, "route", f"{label} (confidence ≥ {arch.threshold:g})"))
                if arch.hand_back:
                    self.edges.append(GraphEdge(target, nid, "hand_back", "hand back"))
            if arch.fallback_route is not None:
                fallback = self.agent(next(r.agent for r in arch.routes if r.name == arch.fallback_route))
                self.edges.append(GraphEdge(nid, fallback, "fallback", "below threshold / unknown"))
        elif isinstance(arch, HandoffChain) and arch.fallback is not None:
            self.named.append((nid, arch.fallback, "fallback", "fallback"))
        elif isinstance(arch, Capabilities):
            self._capabilities(nid, arch)

    def _capabilities(self, nid: str, arch: Capabilities) -> None:
        providers: dict[str, list[str]] = {}
        cap_ids: list[tuple[str, Any]] = []
        for cap in arch.capabilities:
            cid = self.new_id(f"cap_{cap.name}")
            details = [f"requires: {', '.join(cap.requires)}"] if cap.requires else []
            if cap.provides:
                details.append(f"provides: {', '.join(cap.provides)}")
            if cap.always_active:
                details.append("always active")
            self.nodes.append(GraphNode(cid, cap.name, "capability", tuple(details)))
            self.edges.append(GraphEdge(nid, cid, "capability", arch.mode))
            if cap.is_agent:
                self.edges.append(GraphEdge(cid, self.agent(cap.handler), "handler"))
            for p in cap.provides:
                providers.setdefault(p, []).append(cid)
            cap_ids.append((cid, cap))
        for cid, cap in cap_ids:
            for needed in cap.requires:
                for source in providers.get(needed, ()):
                    self.edges.append(GraphEdge(source, cid, "data", needed))

    def resolve_named(self) -> None:
        for source, name, kind, label in self.named:
            target = self.by_name.get(name)
            if target is None:
                target = self.new_id(name)
                self.by_name[name] = target
                self.nodes.append(GraphNode(target, name, "unknown", ("not in this tree",)))
            edge = GraphEdge(source, target, kind, label)
            if edge not in self.edges:
                self.edges.append(edge)


def agent_graph(agent: Actor) -> AgentGraph:
    """The graph of ``agent`` and every agent and capability reachable from it.

    Example:
        Building the graph reads the agents; it calls no model:

        >>> from jeeves_router import Agent, Router, RouterRoute
        >>> from jeeves_router.graph import agent_graph
        >>> billing = Agent("You resolve payments.", name="billing", model="openai:gpt-4.1-mini")
        >>> general = Agent("You answer everything else.", name="general", model="openai:gpt-4.1-mini")
        >>> desk = Agent("Support desk", name="desk", model="openai:gpt-4.1-nano", architecture=Router(
        ...     [RouterRoute("billing", billing, "payments"), RouterRoute("general", general, "anything else")],
        ...     fallback_route="general", require_confidence_above=0.6,
        ... ))
        >>> graph = agent_graph(desk)
        >>> [(edge.source, edge.kind, edge.target) for edge in graph.edges]
        [('desk', 'route', 'billing'), ('desk', 'route', 'general'), ('desk', 'fallback', 'general')]
        >>> print(graph.mermaid())
        flowchart TD
            desk{{"<b>desk</b><br/>Router<br/>classifier: LLMClassifier (the agent's model)<br/>..."}}
            billing["<b>billing</b><br/>ToolLoop<br/>model: openai:gpt-4.1-mini"]
            general["<b>general</b><br/>ToolLoop<br/>model: openai:gpt-4.1-mini"]
            desk -->|"billing (confidence ≥ 0.6)"| billing
            desk -->|"general (confidence ≥ 0.6)"| general
            desk -.->|"below threshold / unknown"| general
        ...
    """
    builder = _Builder()
    root = builder.agent(agent)
    builder.resolve_named()
    return AgentGraph(root, tuple(builder.nodes), tuple(builder.edges))


def tree_agents(*agents: Actor) -> tuple[Actor, ...]:
    """Every agent reachable from ``agents`` (the ones :func:`agent_graph` draws), each once, in order."""
    builder = _Builder()
    for agent in agents:
        builder.agent(agent)
    return tuple(builder.seen)
