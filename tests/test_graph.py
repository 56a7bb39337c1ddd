"""``agent.graph()``: the agent tree as a Mermaid flowchart, and ``jeeves-router graph``."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from jeeves_router import Agent, HandoffRouter, Router, RouterRoute
from jeeves_router.architectures.capabilities import Capabilities, Capability, CapabilityCall
from jeeves_router.classify import LLMClassifier, ToolCallClassifier
from jeeves_router.cli import app
from jeeves_router.graph import GraphEdge, agent_graph
from jeeves_router.testing import ScriptedModel, StaticClassifier


def _m(name: str) -> ScriptedModel:
    return ScriptedModel(["ok"], name=name)


def lookup(invoice_id: str) -> str:
    """Find an invoice."""
    return invoice_id


def build_desk() -> Agent:
    billing = Agent("Billing.", name="billing", model=_m("b"), tools=[lookup])
    general = Agent("General.", name="general", model=_m("g"))
    return Agent(
        "Desk",
        name="desk",
        model=_m("clf"),
        architecture=Router(
            routes=[RouterRoute("billing", billing, "payments"), RouterRoute("other", general, "the rest")],
            fallback_route="other",
            require_confidence_above=0.6,
        ),
    )


desk = build_desk()


def test_router_graph_is_exact_mermaid() -> None:
    assert desk.graph() == (
        "flowchart TD\n"
        "    desk{{\"<b>desk</b><br/>Router<br/>classifier: LLMClassifier (the agent's model)<br/>model: test:clf"
        "<br/>threshold: 0.6"
        '<br/>fallback: other"}}\n'
        '    billing["<b>billing</b><br/>ToolLoop<br/>model: test:b<br/>tools: lookup"]\n'
        '    general["<b>general</b><br/>ToolLoop<br/>model: test:g"]\n'
        '    desk -->|"billing (confidence ≥ 0.6)"| billing\n'
        '    desk -->|"other → general (confidence ≥ 0.6)"| general\n'
        '    desk -.->|"below threshold / unknown"| general\n'
        "    classDef router fill:#e8f0fe,stroke:#3367d6\n"
        "    class desk router\n"
    )


def test_embedded_classifier_and_no_fallback_are_named() -> None:
    a = Agent("A.", name="a", model=_m("a"))
    router = Agent(
        "R",
        name="r",
        architecture=Router(routes=[RouterRoute("a", a)], classifier=StaticClassifier("a", 0.9)),
    )
    node = agent_graph(router).node("r")
    assert node.kind == "router"
    assert node.details == ("Router", "classifier: StaticClassifier", "threshold: 0", "fallback: none (unresolved)")


def test_handoffs_by_object_and_by_name_form_a_cycle_once() -> None:
    technical = Agent("Tech.", name="technical", model=_m("t"), handoffs=["triage"])  # back by name
    billing = Agent("Billing.", name="billing", model=_m("b"))
    triage = Agent("Triage.", name="triage", model=_m("x"), handoffs=[billing, technical, "nobody"])
    g = agent_graph(triage)
    assert [n.name for n in g.nodes] == ["triage", "billing", "technical", "nobody"]
    assert g.node("nobody").kind == "unknown"
    assert set(g.edges) == {
        GraphEdge("triage", "billing", "handoff", "handoff"),
        GraphEdge("triage", "technical", "handoff", "handoff"),
        GraphEdge("technical", "triage", "handoff", "handoff"),
        GraphEdge("triage", "nobody", "handoff", "handoff"),
    }
    text = triage.graph()
    assert '    technical ==>|"handoff"| triage\n' in text
    assert '    nobody[/"<b>nobody</b><br/>not in this tree"/]\n' in text
    assert "HandoffChain" in g.node("triage").details


def test_handoff_router_has_hand_back_edges_and_one_node_per_agent() -> None:
    shared = Agent("Shared.", name="shared", model=_m("s"))
    hr = Agent(
        "Front",
        name="front",
        model=_m("f"),
        architecture=HandoffRouter(
            routes=[RouterRoute("one", shared), RouterRoute("two", shared)], require_confidence_above=0.5
        ),
    )
    g = agent_graph(hr)
    assert [n.id for n in g.nodes] == ["front", "shared"]
    assert GraphEdge("shared", "front", "hand_back", "hand back") in g.edges
    assert GraphEdge("front", "shared", "route", "two → shared (confidence ≥ 0.5)") in g.edges


def test_capabilities_show_requires_provides_and_data_edges() -> None:
    async def fetch(call: CapabilityCall) -> str:
        return "data"

    writer = Agent("Write.", name="writer", model=_m("w"))
    agent = Agent(
        "Analyst",
        name="analyst",
        model=_m("o"),
        architecture=Capabilities(
            [
                Capability("fetch", fetch, "get invoices", provides=("invoices",), always_active=True),
                Capability("report", writer, "write it", requires=("invoices",), provides=("report",)),
            ]
        ),
    )
    g = agent_graph(agent)
    assert g.node("fetch").details == ("provides: invoices", "always active")
    assert g.node("report").details == ("requires: invoices", "provides: report")
    assert set(g.edges) == {
        GraphEdge("analyst", "cap_fetch", "capability", "plan_first"),
        GraphEdge("analyst", "cap_report", "capability", "plan_first"),
        GraphEdge("cap_report", "writer", "handler", ""),
        GraphEdge("cap_fetch", "cap_report", "data", "invoices"),
    }
    assert '    cap_fetch(["<b>fetch</b><br/>provides: invoices<br/>always active"])\n' in agent.graph()


def test_names_are_escaped_and_ids_unique() -> None:
    a1 = Agent("x", name="end", model=_m("1"))  # 'end' is a Mermaid keyword
    a2 = Agent("y", name="end", model=_m("2"))
    root = Agent("r", name="root", model=_m("r"), handoffs=[a1, a2])
    g = agent_graph(root)
    assert [n.id for n in g.nodes] == ["root", "end_2", "end_3"]


def test_cli_graph_prints_the_flowchart_and_rejects_bad_specs() -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["graph", "tests.test_graph:desk"])
    assert result.exit_code == 0, result.output
    assert result.stdout == desk.graph()
    from_factory = runner.invoke(app, ["graph", "tests.test_graph:build_desk"])
    assert from_factory.stdout == desk.graph()
    bad = runner.invoke(app, ["graph", "tests.test_graph"])
    assert bad.exit_code == 2 and "module:attribute" in bad.stderr
    missing = runner.invoke(app, ["graph", "tests.test_graph:nope"])
    assert missing.exit_code == 2 and "cannot import" in missing.stderr
    wrong = runner.invoke(app, ["graph", "tests.test_graph:_m"])
    assert wrong.exit_code == 2


def test_cli_graph_of_the_support_desk_example() -> None:
    result = CliRunner().invoke(app, ["graph", "examples.support_desk:desk"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("flowchart TD\n    desk{{")
    assert '    desk -->|"billing (confidence ≥ 0.6)"| billing\n' in result.stdout
    assert "tools: lookup_invoice" in result.stdout


class _Keyword:
    """A classifier of the user's own (the protocol only)."""

    async def classify(self, request: object) -> object:
        raise NotImplementedError


def _router_node(architecture: Router, model: ScriptedModel | None = None) -> tuple[str, ...]:
    agent = Agent("R", name="r", model=model, architecture=architecture)
    return agent_graph(agent).node("r").details


_ROUTES = [RouterRoute("a", Agent("A.", name="a", model=_m("a")), "payments", ["I was charged twice"])]


@pytest.mark.parametrize(
    ("architecture", "said"),
    [
        (Router(_ROUTES), ["classifier: LLMClassifier (the agent's model)", "model: test:desk"]),
        (
            Router(_ROUTES, classifier_model=_m("cheap")),
            ["classifier: LLMClassifier (model test:cheap)", "model: test:desk"],
        ),
        (
            Router(_ROUTES, classifier=LLMClassifier("openai:gpt-4.1-nano")),
            ["classifier: LLMClassifier (model openai:gpt-4.1-nano)", "model: test:desk"],
        ),
        (HandoffRouter(_ROUTES), ["classifier: ToolCallClassifier (the agent's model)", "model: test:desk"]),
        (
            Router(_ROUTES, classifier=ToolCallClassifier(_m("tools"))),
            ["classifier: ToolCallClassifier (model test:tools)", "model: test:desk"],
        ),
        (Router(_ROUTES, classifier=StaticClassifier("a")), ["classifier: StaticClassifier", "model: test:desk"]),
        (Router(_ROUTES, classifier=_Keyword()), ["classifier: _Keyword", "model: test:desk"]),  # type: ignore[arg-type]
    ],
    ids=["default", "classifier_model", "llm", "handoff_router", "tool_call", "static", "custom"],
)
def test_a_router_node_says_which_classifier_decides(architecture: Router, said: list[str]) -> None:
    details = _router_node(architecture, _m("desk"))
    assert list(details[1:3]) == said


def embedded_desk() -> Agent:
    """A router deciding with the embedded classifier behind a cascade (for ``jeeves-router graph``)."""
    from jeeves_router.classify.cascade import CascadeClassifier
    from jeeves_router.classify.embedding import EmbeddingClassifier

    embedded = EmbeddingClassifier([r.spec for r in _ROUTES], scorer="centroid", threshold=0.55)
    cascade = CascadeClassifier(embedded, LLMClassifier(_m("second")), accept_above=0.7)
    return Agent("R", name="r", architecture=Router(_ROUTES, classifier=cascade))


def test_an_embedded_classifier_and_a_cascade_show_their_encoder_scorer_threshold_and_stages() -> None:
    pytest.importorskip("onnxruntime")
    from jeeves_router.classify.embedding import EmbeddingClassifier

    plain = EmbeddingClassifier([r.spec for r in _ROUTES])
    encoder = plain.encoder.name
    assert _router_node(Router(_ROUTES, classifier=plain))[1] == (
        f"classifier: EmbeddingClassifier (encoder {encoder}, scorer late, threshold none)"
    )
    result = CliRunner().invoke(app, ["graph", "tests.test_graph:embedded_desk"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[1] == (
        '    r{{"<b>r</b><br/>Router<br/>classifier: CascadeClassifier (first stage taken at confidence ≥ 0.7)'
        f"<br/>first stage: EmbeddingClassifier (encoder {encoder}, scorer centroid, threshold 0.55)"
        '<br/>second stage: LLMClassifier (model test:second)<br/>threshold: 0<br/>fallback: none (unresolved)"}}'
    )
