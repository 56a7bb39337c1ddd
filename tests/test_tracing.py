"""OpenTelemetry spans (GenAI semantic conventions), asserted on the SDK's in-memory exporter."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from jeeves_router import Agent, Recovery, Router, RouterRoute, tool
from jeeves_router.architectures.react import ToolLoop
from jeeves_router.models.anthropic import AnthropicModel
from jeeves_router.models.openai import OpenAIModel
from jeeves_router.policies import RetryPolicy
from jeeves_router.testing import Call, Chunks, ScriptedModel
from jeeves_router.tracing import CAPTURE_CONTENT_ENV, active_tracer
from tests.loopback import LoopbackServer, Reply, Status, loopback  # noqa: F401
from tests.test_local_llm import local_extra, smol  # noqa: F401  (fixtures)

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemorySpanExporter]:
    """A configured SDK tracer provider (as the global one) exporting to memory."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", provider)  # restored after the test
    monkeypatch.delenv(CAPTURE_CONTENT_ENV, raising=False)
    yield exporter
    provider.shutdown()


def tree(exporter: InMemorySpanExporter) -> list[tuple[int, str]]:
    """(depth, name) of every finished span, depth first in start order; one trace only."""
    finished = sorted(exporter.get_finished_spans(), key=lambda s: s.start_time or 0)
    assert len({s.context.trace_id for s in finished}) == 1
    children: dict[int | None, list[ReadableSpan]] = {}
    for s in finished:
        children.setdefault(s.parent.span_id if s.parent else None, []).append(s)
    out: list[tuple[int, str]] = []

    def walk(parent: int | None, depth: int) -> None:
        for s in children.get(parent, []):
            out.append((depth, s.name))
            walk(s.context.span_id, depth + 1)

    walk(None, 0)
    assert len(out) == len(finished), "every span hangs off the root"
    return out


def by_name(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return sorted((s for s in exporter.get_finished_spans() if s.name == name), key=lambda s: s.start_time or 0)


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return {k: (tuple(v) if isinstance(v, (list, tuple)) else v) for k, v in (span.attributes or {}).items()}


@tool
def lookup_invoice(invoice_id: str) -> str:
    """Look up an invoice."""
    return f"{invoice_id}: paid twice"


def desk(
    billing_steps: list[Any], *, recovery: Recovery | None = None, reply: str = "route: billing\nconfidence: 0.9"
) -> Agent:
    billing = Agent(
        "Billing.", name="billing", model=ScriptedModel(billing_steps, name="billing"), tools=[lookup_invoice]
    )
    general = Agent("General.", name="general", model=ScriptedModel(["Hi."], name="general"))
    return Agent(
        "Desk",
        name="desk",
        model=ScriptedModel([reply] * 3, name="clf"),
        architecture=Router(
            [RouterRoute("billing", billing, "payments"), RouterRoute("general", general, "the rest")],
            fallback_route="general",
            require_confidence_above=0.6,
            recovery=recovery,
        ),
    )


ROUTED = [Call("lookup_invoice", {"invoice_id": "INV-1"}), Chunks("Refunded ", "INV-1.")]


@pytest.mark.anyio
async def test_routed_run_span_tree_and_attributes(spans: InMemorySpanExporter) -> None:
    result = await desk(ROUTED).run("I was charged twice", session_id="s-1")
    assert result.output == "Refunded INV-1."
    assert tree(spans) == [
        (0, "invoke_agent desk"),
        (1, "chat clf"),
        (1, "invoke_agent billing"),
        (2, "chat billing"),
        (2, "execute_tool lookup_invoice"),
        (2, "chat billing"),
    ]
    [root] = by_name(spans, "invoke_agent desk")
    assert root.kind is SpanKind.INTERNAL and root.status.status_code is StatusCode.UNSET
    assert attrs(root) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "desk",
        "gen_ai.conversation.id": "s-1",
        "gen_ai.request.model": "clf",
        "jeeves_router.path": "desk",
        "jeeves_router.architecture": "Router",
        "jeeves_router.route.confidence": 0.9,
        "jeeves_router.route.threshold": 0.6,
        "jeeves_router.classifier.kind": "llm",
        "jeeves_router.run.status": "ok",
        "jeeves_router.route": "billing",
        "gen_ai.usage.input_tokens": 30,
        "gen_ai.usage.output_tokens": 15,
    }
    decision, dispatched = root.events
    assert decision.name == "jeeves_router.route.decision"
    assert dict(decision.attributes or {}) == {
        "jeeves_router.route": "billing",
        "jeeves_router.route.confidence": 0.9,
        "jeeves_router.route.threshold": 0.6,
        "jeeves_router.route.status": "ok",
        "jeeves_router.classifier.kind": "llm",
        "jeeves_router.classifier.attempts": 1,
    }
    assert dispatched.name == "jeeves_router.router.dispatched"
    assert dict(dispatched.attributes or {}) == {"jeeves_router.route": "billing", "jeeves_router.forced": False}
    [billing] = by_name(spans, "invoke_agent billing")
    assert attrs(billing)["gen_ai.conversation.id"] == "s-1__route_billing"
    assert attrs(billing)["jeeves_router.path"] == "desk/billing"
    first_chat, second_chat = by_name(spans, "chat billing")
    assert first_chat.kind is SpanKind.CLIENT
    assert attrs(first_chat) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "test",
        "gen_ai.request.model": "billing",
        "jeeves_router.attempt": 1,
        "gen_ai.response.model": "scripted",
        "gen_ai.usage.input_tokens": 10,
        "gen_ai.usage.output_tokens": 5,
        "jeeves_router.cost_usd": 0.0,
        "gen_ai.response.finish_reasons": ("tool_calls",),
    }
    assert attrs(second_chat)["gen_ai.response.finish_reasons"] == ("stop",)
    [tool_span] = by_name(spans, "execute_tool lookup_invoice")
    assert attrs(tool_span) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "lookup_invoice",
        "gen_ai.tool.call.id": "call_1_0",
        "gen_ai.tool.type": "function",
    }
    # the tool ran between the two model calls
    assert first_chat.end_time <= tool_span.start_time <= tool_span.end_time <= second_chat.start_time  # type: ignore[operator]
    for s in spans.get_finished_spans():  # no text unless opted in
        assert not any("messages" in k or "arguments" in k or "result" in k for k in (s.attributes or {}))


@pytest.mark.anyio
async def test_content_is_recorded_only_when_opted_in(
    spans: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "true")
    await desk(ROUTED).run("I was charged twice", session_id="s-2")
    [billing] = by_name(spans, "invoke_agent billing")
    assert "I was charged twice" in attrs(billing)["gen_ai.input.messages"]
    assert "Refunded INV-1." in attrs(billing)["gen_ai.output.messages"]
    [tool_span] = by_name(spans, "execute_tool lookup_invoice")
    assert attrs(tool_span)["gen_ai.tool.call.arguments"] == '{"invoice_id": "INV-1"}'
    assert attrs(tool_span)["gen_ai.tool.call.result"] == "INV-1: paid twice"


@pytest.mark.anyio
async def test_handoff_chain_gives_each_target_its_own_span(spans: InMemorySpanExporter) -> None:
    billing = Agent("Billing.", name="billing", model=ScriptedModel(["Refunded."], name="b"))
    triage = Agent(
        "Triage.",
        name="triage",
        model=ScriptedModel([Call("transfer_to_billing", {"reason": "refund"})], name="t"),
        handoffs=[billing],
    )
    result = await triage.run("refund please", session_id="h-1")
    assert result.output == "Refunded."
    assert tree(spans) == [
        (0, "invoke_agent triage"),
        (1, "chat t"),
        (1, "execute_tool transfer_to_billing"),
        (1, "invoke_agent billing"),
        (2, "chat b"),
    ]
    [root] = by_name(spans, "invoke_agent triage")
    assert attrs(root)["jeeves_router.architecture"] == "HandoffChain"
    handoffs = [e for e in root.events if e.name.startswith("jeeves_router.handoff")]
    edge = {"jeeves_router.handoff.from": "triage", "jeeves_router.handoff.to": "billing"}
    assert [(e.name, dict(e.attributes or {})) for e in handoffs] == [
        ("jeeves_router.handoff.requested", edge),
        ("jeeves_router.handoff.completed", edge),
    ]
    [target] = by_name(spans, "invoke_agent billing")
    assert attrs(target)["gen_ai.agent.name"] == "billing"
    assert attrs(target)["jeeves_router.run.status"] == "ok"


@pytest.mark.anyio
async def test_recovered_failure_shows_the_failed_attempt_and_the_retry(spans: InMemorySpanExporter) -> None:
    async def no_wait(_: float) -> None:
        return None

    agent = desk([TimeoutError("upstream timed out"), *ROUTED], recovery=Recovery(sleep=no_wait))
    result = await agent.run("I was charged twice", session_id="r-1")
    assert result.status == "ok"
    assert tree(spans) == [
        (0, "invoke_agent desk"),
        (1, "chat clf"),
        (1, "invoke_agent billing"),
        (2, "chat billing"),
        (1, "invoke_agent billing"),
        (2, "chat billing"),
        (2, "execute_tool lookup_invoice"),
        (2, "chat billing"),
    ]
    failed_run, ok_run = by_name(spans, "invoke_agent billing")
    assert failed_run.status.status_code is StatusCode.ERROR
    assert attrs(failed_run)["error.type"] == "TimeoutError"
    assert [e.name for e in failed_run.events] == ["exception"]
    assert ok_run.status.status_code is StatusCode.UNSET and attrs(ok_run)["jeeves_router.run.status"] == "ok"
    failed_chat = by_name(spans, "chat billing")[0]
    assert failed_chat.status.status_code is StatusCode.ERROR and attrs(failed_chat)["error.type"] == "TimeoutError"
    assert "gen_ai.usage.input_tokens" not in attrs(failed_chat)
    [root] = by_name(spans, "invoke_agent desk")
    [retry] = [e for e in root.events if e.name == "jeeves_router.recovery.retry"]
    assert dict(retry.attributes or {}) == {
        "jeeves_router.operation": "route:billing",
        "jeeves_router.attempt": 2,
        "jeeves_router.retry.delay_s": 0.5,
        "jeeves_router.severity": "retriable",
        "error.type": "TimeoutError",
    }


@pytest.mark.anyio
async def test_stream_closed_early_ends_every_span(spans: InMemorySpanExporter) -> None:
    agent = desk([Chunks("one ", "two ", "three")])
    async with agent.stream("charged twice", session_id="c-1") as events:
        async for ev in events:
            if ev.kind == "text.delta":
                break  # closed after the first token
    assert tree(spans) == [
        (0, "invoke_agent desk"),
        (1, "chat clf"),
        (1, "invoke_agent billing"),
        (2, "chat billing"),
    ]
    for name in ("invoke_agent desk", "invoke_agent billing"):
        [s] = by_name(spans, name)
        assert attrs(s)["jeeves_router.run.status"] == "closed_early"
        assert s.status.status_code is StatusCode.UNSET and s.end_time is not None
    [chat] = by_name(spans, "chat billing")
    assert "gen_ai.response.finish_reasons" not in attrs(chat)  # it never finished


@pytest.mark.anyio
async def test_provider_retries_give_one_chat_span_per_attempt(
    spans: InMemorySpanExporter,
    loopback: LoopbackServer,  # noqa: F811
) -> None:
    loopback.script(Status(503), Reply(text="Refund issued.", input_tokens=12, output_tokens=3))

    async def no_wait(_: float) -> None:
        return None

    model = OpenAIModel(
        "gpt-4.1-mini",
        client=loopback.openai_client(),
        retry=RetryPolicy(max_attempts=2, initial_delay_s=0.01, jitter=0.0),
        sleep=no_wait,
        rng=random.Random(0),
    )
    agent = Agent("Billing.", name="billing", model=model)
    assert (await agent.run("refund", session_id="p-1")).output == "Refund issued."
    assert tree(spans) == [(0, "invoke_agent billing"), (1, "chat gpt-4.1-mini"), (1, "chat gpt-4.1-mini")]
    failed, ok = by_name(spans, "chat gpt-4.1-mini")
    assert attrs(failed)["error.type"] == "503" and attrs(failed)["jeeves_router.attempt"] == 1
    assert attrs(failed)["gen_ai.provider.name"] == "openai"
    assert attrs(ok)["jeeves_router.attempt"] == 2
    assert attrs(ok)["gen_ai.usage.input_tokens"] == 12 and attrs(ok)["gen_ai.usage.output_tokens"] == 3
    assert attrs(ok)["gen_ai.response.finish_reasons"] == ("stop",)
    assert attrs(ok)["gen_ai.response.model"]
    assert ok.status.status_code is StatusCode.UNSET


def test_no_tracer_without_a_provider_and_nothing_imported_without_opentelemetry() -> None:
    assert active_tracer() is None  # the API is imported here, but no provider is configured
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    env["PYTHONPATH"] = str(ROOT)
    code = (
        "import sys, anyio\n"
        "from jeeves_router import Agent\n"
        "from jeeves_router.testing import ScriptedModel\n"
        "anyio.run(Agent('x', name='a', model=ScriptedModel(['hi'])).run, 'hello')\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


@pytest.mark.anyio
async def test_capabilities_runs_nest_their_agent_handlers(spans: InMemorySpanExporter) -> None:
    from tests.test_capabilities import Brain, Capability, Fn, agent, plan

    writer = Agent("Writes.", name="writer", model=ScriptedModel(["Three rows."], name="writer"))
    caps = [
        Capability("sql", Fn("rows: 3", provides={"table": "t1"}), "queries", provides=("table", "rows")),
        Capability("writer", writer, "writes", requires=("rows",)),
    ]
    brain = Brain(yes={"sql", "writer"}, plans=[plan("sql", "writer")])
    assert (await agent(brain, caps).run("how many rows?", session_id="cap-1")).output == "Three rows."
    assert tree(spans) == [
        (0, "invoke_agent desk"),
        (1, "chat brain"),
        (1, "chat brain"),
        (1, "chat brain"),
        (1, "invoke_agent writer"),
        (2, "chat writer"),
    ]
    [root] = by_name(spans, "invoke_agent desk")
    steps = [dict(e.attributes or {}) for e in root.events if e.name == "jeeves_router.capability.completed"]
    assert [(s["jeeves_router.capability"], s["jeeves_router.ok"]) for s in steps] == [("sql", True), ("writer", True)]
    [selected] = [e for e in root.events if e.name == "jeeves_router.capabilities.selected"]
    assert tuple((selected.attributes or {})["jeeves_router.capabilities"]) == ("sql", "writer")


@pytest.mark.anyio
async def test_a_step_answered_from_an_earlier_plan_says_so_on_the_span(spans: InMemorySpanExporter) -> None:
    from tests.test_capabilities_replan_repeat import failing_once, plan, replanned_desk

    refunds: list[str] = []
    desk_, _ = replanned_desk(refunds, failing_once(), plan("refunds", "notify"))
    assert (await desk_.run("refund INV-7 and tell me", session_id="cap-2")).status == "ok"
    [root] = by_name(spans, "invoke_agent desk")
    steps = [dict(e.attributes or {}) for e in root.events if e.name == "jeeves_router.capability.completed"]
    shown = [(s["jeeves_router.step"], s.get("jeeves_router.capability.answered_from")) for s in steps]
    assert shown == [(1, None), (2, None), (3, 1), (4, None)]  # step 3 was not run again: step 1 answered it


@pytest.mark.anyio
async def test_a_journaled_run_gives_the_same_tree(spans: InMemorySpanExporter) -> None:
    from jeeves_router.journal import JournalRuntime, MemoryJournal

    agent = desk(ROUTED)
    agent.runtime = JournalRuntime(MemoryJournal())
    await agent.run("I was charged twice", session_id="j-1")
    assert [name for _, name in tree(spans)] == [
        "invoke_agent desk",
        "chat clf",
        "invoke_agent billing",
        "chat billing",
        "execute_tool lookup_invoice",
        "chat billing",
    ]


@pytest.mark.anyio
async def test_low_confidence_fallback_is_on_the_span_and_an_event(spans: InMemorySpanExporter) -> None:
    result = await desk(ROUTED, reply="route: billing\nconfidence: 0.3").run("hmm", session_id="f-1")
    assert (result.status, result.route) == ("fallback", "general")
    assert [name for _, name in tree(spans)] == [
        "invoke_agent desk",
        "chat clf",
        "invoke_agent general",
        "chat general",
    ]
    [root] = by_name(spans, "invoke_agent desk")
    assert attrs(root)["jeeves_router.route"] == "general"
    assert attrs(root)["jeeves_router.route.fallback_reason"] == "low_confidence"
    assert attrs(root)["jeeves_router.route.confidence"] == 0.3
    decision, fallback = (e for e in root.events if e.name != "jeeves_router.router.dispatched")
    assert decision.name == "jeeves_router.route.decision"
    assert (decision.attributes or {})["jeeves_router.route"] == "billing"
    assert fallback.name == "jeeves_router.router.fallback"
    assert dict(fallback.attributes or {}) == {
        "jeeves_router.route.fallback_reason": "low_confidence",
        "jeeves_router.route": "general",
        "jeeves_router.route.requested": "billing",
        "jeeves_router.route.confidence": 0.3,
    }


def test_unconfigured_check_does_not_call_get_tracer_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    def expensive() -> None:
        raise AssertionError("get_tracer_provider() looks the environment up on every call")

    monkeypatch.setattr(trace, "get_tracer_provider", expensive)
    assert active_tracer() is None


def test_a_provider_named_by_the_environment_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    from opentelemetry.util._once import Once

    import jeeves_router.tracing as tracing

    monkeypatch.setenv("OTEL_PYTHON_TRACER_PROVIDER", "sdk_tracer_provider")
    monkeypatch.setattr(tracing, "_env_provider", [])  # read the environment again
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)
    monkeypatch.setattr(trace, "_TRACER_PROVIDER_SET_ONCE", Once())
    tracer = active_tracer()
    assert tracer is not None and isinstance(trace.get_tracer_provider(), TracerProvider)
    assert active_tracer() is tracer  # found once, then cached


@pytest.mark.anyio
@pytest.mark.local_llm
@pytest.mark.timeout(900)
async def test_llama_cpp_calls_are_chat_spans(spans: InMemorySpanExporter, smol: Any) -> None:  # noqa: F811
    from jeeves_router.messages import user
    from jeeves_router.models.base import ModelRequest

    response = await smol.request(ModelRequest((user("Say hi."),), max_tokens=4, temperature=0.0))
    [chat] = spans.get_finished_spans()
    assert chat.name == "chat smollm2"
    values = attrs(chat)
    assert (values["gen_ai.provider.name"], values["gen_ai.request.model"]) == ("llamacpp", "smollm2")
    assert values["gen_ai.usage.output_tokens"] == response.usage.output_tokens > 0
    assert values["gen_ai.usage.input_tokens"] == response.usage.input_tokens > 0
    assert len(values["gen_ai.response.finish_reasons"]) == 1


class _CloseFails:
    """Events or stream items whose closing raises, as a connection reset while a stream closes does."""

    def __init__(self, item: Any) -> None:
        self.item = item

    def __aiter__(self) -> _CloseFails:
        return self

    async def __anext__(self) -> Any:
        return self.item

    async def aclose(self) -> None:
        raise OSError("connection reset while closing")


@pytest.mark.anyio
async def test_a_span_ends_when_closing_what_it_wraps_raises(spans: InMemorySpanExporter) -> None:
    from types import SimpleNamespace

    from jeeves_router.events import RunStarted
    from jeeves_router.ledger import Ledger
    from jeeves_router.models.base import ModelTextDelta
    from jeeves_router.tracing import traced_model_stream, traced_run

    ev = RunStarted(session_id="s", path=("billing",), agent="billing", prompt="hi")
    agent = SimpleNamespace(name="billing", model="test:m", architecture=None)
    ctx = SimpleNamespace(session_id="s", path=("billing",), prompt="hi", result=None, ledger=Ledger())
    for wrapped in (
        traced_run(_CloseFails(ev), agent, ctx),
        traced_model_stream("test:m", 1, _CloseFails(ModelTextDelta("x"))),
    ):
        await wrapped.__anext__()  # one item, then closed early
        with pytest.raises(OSError, match="connection reset"):
            await wrapped.aclose()  # type: ignore[attr-defined]
    assert sorted(s.name for s in spans.get_finished_spans()) == ["chat m", "invoke_agent billing"]


@pytest.mark.parametrize(
    ("second", "confidence", "reason"),
    [("I am not sure.", None, "unknown_route"), ("route: billing\nconfidence: 0.3", 0.3, "low_confidence")],
)
@pytest.mark.anyio
async def test_the_run_span_gives_the_confidence_of_the_decision_that_answered(
    spans: InMemorySpanExporter, second: str, confidence: float | None, reason: str
) -> None:
    from tests.test_seams_serve_decision import desk as reclassifying_desk

    # general (0.9) refuses the request, the classifier is asked again and answers ``second``
    result = await reclassifying_desk("route: general\nconfidence: 0.9", second, "billing").run("hello")
    assert (result.status, result.route, result.confidence, result.fallback_reason) == (
        "fallback", "billing", confidence, reason,
    )  # fmt: skip
    [root] = by_name(spans, "invoke_agent desk")
    assert attrs(root).get("jeeves_router.route.confidence") == confidence  # not 0.0 from the unusable reply
    assert attrs(root)["jeeves_router.route.fallback_reason"] == reason
    decisions = [dict(e.attributes or {}) for e in root.events if e.name == "jeeves_router.route.decision"]
    assert [d["jeeves_router.route.confidence"] for d in decisions] == [0.9, confidence or 0.0]  # each one kept


@pytest.mark.parametrize(
    ("reply", "routing"),
    [
        ("route: billing\nconfidence: 0.9", {"route": "billing", "route.confidence": 0.9}),
        (
            "route: billing\nconfidence: 0.3",
            {"route": "general", "route.confidence": 0.3, "route.fallback_reason": "low_confidence"},
        ),
    ],
)
@pytest.mark.anyio
async def test_a_failed_run_span_gives_the_routing_it_got_to(
    spans: InMemorySpanExporter, reply: str, routing: dict[str, Any]
) -> None:
    # the specialist raises after the dispatch: no result, but the route, its confidence and the
    # fallback reason are those the served headers and the session's turns give (routing_update)
    failing = {name: Agent(name, name=name, model=ScriptedModel([OSError("down")])) for name in ("billing", "general")}
    router = Router(
        [RouterRoute("billing", failing["billing"], "payments"), RouterRoute("general", failing["general"], "rest")],
        fallback_route="general",
        require_confidence_above=0.6,
    )
    agent = Agent("Desk", name="desk", model=ScriptedModel([reply], name="router"), architecture=router)
    with pytest.raises(OSError, match="down"):
        await agent.run("charged twice")
    [root] = by_name(spans, "invoke_agent desk")
    shown = {k.removeprefix("jeeves_router."): v for k, v in attrs(root).items() if k.startswith("jeeves_router.route")}
    assert shown == {**routing, "route.threshold": 0.6}
    assert root.status.status_code is StatusCode.ERROR


@pytest.mark.anyio
async def test_a_broken_streams_span_has_the_tokens_its_provider_reported(
    spans: InMemorySpanExporter,
    loopback: LoopbackServer,  # noqa: F811
) -> None:
    loopback.script(Reply(text=["Refund ", "iss", "ued."], input_tokens=12, disconnect_after=4))
    model = AnthropicModel("claude-haiku-4-5", client=loopback.anthropic_client(), rng=random.Random(0))
    agent = Agent("Billing.", name="billing", model=model, architecture=ToolLoop(recovery=Recovery()))
    result = await agent.run("refund", session_id="p-2")
    assert result.status == "critical" and result.usage.input_tokens == 12
    [chat] = by_name(spans, "chat claude-haiku-4-5")
    assert chat.status.status_code is StatusCode.ERROR
    assert attrs(chat)["gen_ai.usage.input_tokens"] == 12  # reported as the stream started
    assert "jeeves_router.cost_usd" not in attrs(chat)  # what a broken stream was billed is unknown
    [run] = by_name(spans, "invoke_agent billing")
    assert attrs(run)["gen_ai.usage.input_tokens"] == 12
