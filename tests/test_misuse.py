"""Mistakes a new user makes with the public constructors: each is a ``UsageError`` that says what to change."""

from __future__ import annotations

import pytest

from jeeves_router import Agent, Handoff, UsageError
from jeeves_router.testing import ScriptedModel


def test_a_handoff_to_an_agent_object_names_the_agent_to_pass_instead() -> None:
    billing = Agent("You resolve payments.", name="billing", model=ScriptedModel([]))
    with pytest.raises(UsageError, match=r"Handoff target must be an agent or route name \(a string\), got Agent\("):
        Handoff(target=billing)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r": pass its name, Handoff\(target='billing'\)"):
        Handoff(billing)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"got ''"):
        Handoff("")
    assert Handoff("billing", reason="refund") == Handoff(target="billing", reason="refund")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"time_limit_s": "10"}, r"time_limit_s \(seconds, or None\) must be a number > 0, got '10'"),
        ({"time_limit_s": float("nan")}, r"time_limit_s \(seconds, or None\) must be a number > 0, got nan"),
        ({"time_limit_s": 0}, r"time_limit_s \(seconds, or None\) must be a number > 0, got 0"),
        ({"max_replans": "2"}, r"max_replans must be an integer >= 0, got '2'"),
        ({"max_reclassifications": 1.5}, r"max_reclassifications must be an integer >= 0, got 1\.5"),
        ({"max_steps": True}, r"max_steps must be an integer >= 1, got True"),
        ({"explain_timeout_s": "5"}, r"explain_timeout_s must be a number > 0, got '5'"),
    ],
)
def test_recovery_bounds_of_the_wrong_type_are_named(kwargs: dict[str, object], match: str) -> None:
    from jeeves_router import Recovery

    with pytest.raises(UsageError, match=match):
        Recovery(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_attempts": "3"}, r"RetryPolicy\.max_attempts must be an integer >= 1, got '3'"),
        ({"initial_delay_s": float("nan")}, r"RetryPolicy\.initial_delay_s must be a number >= 0, got nan"),
        ({"max_delay_s": -1}, r"RetryPolicy\.max_delay_s must be a number >= 0, got -1"),
        ({"multiplier": "2"}, r"RetryPolicy\.multiplier must be a number >= 1, got '2'"),
        ({"jitter": 1.5}, r"RetryPolicy\.jitter must be a number within \[0, 1\], got 1\.5"),
    ],
)
def test_retry_policy_values_of_the_wrong_type_are_named(kwargs: dict[str, object], match: str) -> None:
    from jeeves_router import RetryPolicy

    with pytest.raises(UsageError, match=match):
        RetryPolicy(**kwargs)  # type: ignore[arg-type]


def test_one_tool_route_capability_or_handoff_in_a_lists_place_is_named() -> None:
    from jeeves_router import Capabilities, Capability, HandoffRouter, Router, RouterRoute, tool

    @tool
    def lookup_invoice(invoice_id: str) -> str:
        """Look up an invoice."""
        return invoice_id

    billing = Agent("You resolve payments.", name="billing", model=ScriptedModel([]))
    route = RouterRoute("billing", billing, "payments")
    cases = [
        (lambda: Agent("x", name="a", model=ScriptedModel([]), tools=lookup_invoice),
         r"tools must be a list, got Tool 'lookup_invoice': pass a list even of one, tools=\[lookup_invoice\]"),
        (lambda: Agent("x", name="a", model=ScriptedModel([]), handoffs=billing),
         r"handoffs must be a list, got Agent 'billing': pass a list even of one, handoffs=\[billing\]"),
        (lambda: Agent("x", name="a", model=ScriptedModel([]), handoffs="billing"),  # not seven agents b, i, l, ...
         r"handoffs must be a list, got 'billing'"),
        (lambda: Router(route), r"routes must be a list, got RouterRoute 'billing': pass a list even of one"),
        (lambda: HandoffRouter(route), r"routes must be a list, got RouterRoute 'billing'"),
        (lambda: Capabilities(Capability("billing", billing)), r"capabilities must be a list, got Capability 'bil"),
    ]  # fmt: skip
    for build, match in cases:
        with pytest.raises(UsageError, match=match):
            build()
    assert Agent("x", name="a", model=ScriptedModel([]), tools=(t for t in [lookup_invoice])).tools[0].name == (
        "lookup_invoice"
    )


@pytest.mark.anyio
async def test_history_context_and_options_of_the_wrong_shape_are_named() -> None:
    from jeeves_router.messages import assistant, user

    agent = Agent("t", name="t", model=ScriptedModel(["answer"]))
    hint = r"build them with jeeves_router\.messages\.user\(\.\.\.\) and assistant\(\.\.\.\)"
    wrong: list[tuple[dict[str, object], str]] = [
        (
            {"history": [{"role": "user", "content": "hi"}]},
            r"history must hold Message objects, got dict \{'role'.*; " + hint,
        ),
        ({"history": "hi"}, r"history must be a list of Message objects, got str; " + hint),
        ({"context": ["plan"]}, r"context must be a mapping \(a dict of names to values\), got list"),
        ({"options": "fast"}, r"options must be a mapping \(a dict of names to values\), got str"),
    ]
    for kwargs, match in wrong:
        with pytest.raises(UsageError, match=match):
            await agent.run("x", **kwargs)  # type: ignore[arg-type]
    result = await agent.run("x", history=[user("hi"), assistant("hello")], context={"plan": "gold"})
    assert result.output == "answer"  # the refused calls took no step of the script


def test_a_route_or_capability_description_and_examples_of_the_wrong_kind_are_named() -> None:
    from jeeves_router import Capability, RouterRoute

    billing = Agent("You resolve payments.", name="billing", model=ScriptedModel([]))
    cases = [  # a string as examples would be read one character at a time: 'I', ' ', 'w', ...
        (lambda: RouterRoute("billing", billing, "payments", "I was charged twice"),
         r"route 'billing': examples must be a list of strings, e\.g\. \['I was charged twice'\], got 'I was"),
        (lambda: RouterRoute("billing", billing, ["refund me", "charged twice"]),
         r"route 'billing': description must be a string, got list \['refund me'"),
        (lambda: RouterRoute("billing", billing, "payments", [1, 2]), r"examples must be a list of strings"),
        (lambda: Capability("billing", billing, 5), r"capability 'billing': description must be a string, got int 5"),
    ]  # fmt: skip
    for build, match in cases:
        with pytest.raises(UsageError, match=match):
            build()
    assert RouterRoute("billing", billing, "payments", ("I was charged twice",)).spec.examples == (
        "I was charged twice",
    )


def test_agent_options_of_the_wrong_kind_are_named_at_construction() -> None:
    from jeeves_router import Router, RouterRoute

    def agent(**kwargs: object) -> Agent:
        return Agent("x", name="a", model=ScriptedModel([]), **kwargs)  # type: ignore[arg-type]

    cases = [
        (
            {"architecture": Router},
            r"agent 'a': architecture must be an instance, e\.g\. Router\(\.\.\.\), not the class",
        ),
        (
            {"architecture": "router"},
            r"agent 'a': architecture must be a Router, ToolLoop, Capabilities, \.\.\., got 'router'",
        ),
        ({"temperature": "0.5"}, r"agent 'a': temperature must be a number within \[0, 2\], got '0\.5'"),
        ({"max_tokens": -1}, r"agent 'a': max_tokens must be a positive integer or None, got -1"),
        ({"max_tokens": "100"}, r"agent 'a': max_tokens must be a positive integer or None, got '100'"),
        (
            {"runtime": "runs.db"},
            r"agent 'a': runtime must be a Runtime \(e\.g\. JournalRuntime\(SQLiteJournal\(path\)\)\)",
        ),
        ({"classify_error": "retry"}, r"agent 'a': classify_error must be a function \(exc, context\)"),
    ]
    for kwargs, match in cases:
        with pytest.raises(UsageError, match=match):
            agent(**kwargs)
    billing = Agent("b", name="billing", model=ScriptedModel([]))
    assert agent(architecture=Router([RouterRoute("billing", billing)]), temperature=0, max_tokens=64).max_tokens == 64


def test_router_options_of_the_wrong_kind_are_named_at_construction() -> None:
    from jeeves_router import HandoffRouter, Recovery, Router, RouterRoute, ToolLoop

    routes = [RouterRoute("billing", Agent("b", name="billing", model=ScriptedModel([])), "payments")]
    cases = [
        (lambda: Router(routes, max_format_retries="1"), r"max_format_retries must be an integer >= 0, got '1'"),
        (lambda: Router(routes, max_format_retries=-1), r"max_format_retries must be an integer >= 0, got -1"),
        (lambda: Router(routes, classifier_max_tokens=0), r"classifier_max_tokens must be an integer >= 1, got 0"),
        (lambda: Router(routes, on_bad_confidence=2), r"on_bad_confidence must be within \[0, 1\], got 2"),
        (lambda: Router(routes, on_bad_confidence="0.5"), r"on_bad_confidence must be within \[0, 1\], got '0\.5'"),
        (lambda: Router(routes, sticky="yes"), r"sticky must be True or False, got 'yes'"),
        (lambda: HandoffRouter(routes, hand_back="no"), r"hand_back must be True or False, got 'no'"),
        (lambda: HandoffRouter(routes, router_prompt=5), r"router_prompt must be a string, got int"),
        (lambda: ToolLoop(recovery={"max_steps": 5}), r"recovery must be a Recovery\(\.\.\.\) object, got dict"),
    ]
    for build, match in cases:
        with pytest.raises(UsageError, match=match):
            build()  # type: ignore[no-untyped-call]
    assert Router(routes, on_bad_confidence=0.5, max_format_retries=0).on_bad_confidence == 0.5
    assert ToolLoop(recovery=Recovery()).recovery == Recovery()


def test_embedded_and_cascade_classifier_arguments_of_the_wrong_kind_are_named() -> None:
    pytest.importorskip("onnxruntime")  # the embedded classifier's default encoder (embed extra)
    from jeeves_router.classify import LLMClassifier, RouteSpec
    from jeeves_router.classify.cascade import CascadeClassifier
    from jeeves_router.classify.embedding import EmbeddingClassifier

    with pytest.raises(UsageError, match=r"EmbeddingClassifier: routes must be RouteSpec \(or RouterRoute\) objects, "
                                         r"got 'billing': e\.g\. RouteSpec\('billing', 'payments'"):  # fmt: skip
        EmbeddingClassifier(["billing", "technical"])  # type: ignore[list-item]
    with pytest.raises(UsageError, match=r"route 'billing': examples must be a list of strings"):
        EmbeddingClassifier([RouteSpec("billing", "payments", "I was charged twice"), RouteSpec("tech", "bugs")])  # type: ignore[arg-type]
    specs = [RouteSpec("billing", "payments", ("I was charged twice",)), RouteSpec("tech", "bugs", ("error 500",))]
    with pytest.raises(UsageError, match=r"accept_above must be a number within \[0, 1\], got '0\.8'"):
        CascadeClassifier(EmbeddingClassifier(specs), LLMClassifier(ScriptedModel([])), accept_above="0.8")  # type: ignore[arg-type]
