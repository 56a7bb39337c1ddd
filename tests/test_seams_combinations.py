"""Seams found by combining features the way a user does (an adversarial hunt).

Each test is one combination that went wrong before its fix: a custom classifier's
answer flowing into dispatch, a capability that runs twice in one plan, parallel tool calls
from an OpenAI-compatible local server, a provider failing every capability selection, handoffs on an agent
given its own tool loop, a recovery report explained by a model, a conversation that used
one specialist's tools reaching an Anthropic specialist without tools, a retried specialist
whose model takes another path to the same refund, ...
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from jeeves_router import Agent, Router, RouterRoute, tool
from jeeves_router.architectures.capabilities.architecture import Capabilities, Capability, CapabilityCall
from jeeves_router.architectures.react import ToolLoop
from jeeves_router.classify.types import Classification, ClassifyRequest, ClassifyResult
from jeeves_router.errors import ModelError
from jeeves_router.events import RecoveryRetry, RouterClassified, RunStarted
from jeeves_router.journal import JournalRuntime, SQLiteJournal
from jeeves_router.models.anthropic import AnthropicModel
from jeeves_router.models.base import ModelRequest
from jeeves_router.models.openai import OpenAIModel
from jeeves_router.policies import RetryPolicy
from jeeves_router.recovery import Recovery
from jeeves_router.testing import (
    FAILED_USAGE,
    Call,
    FunctionModel,
    RecordedSleeps,
    Reply,
    ScriptedModel,
    StaticClassifier,
    capture_events,
)
from jeeves_router.usage import Usage
from tests import loopback_wire as wire
from tests.loopback import LoopbackServer, loopback  # noqa: F401  (fixture)

# -- a custom classifier's route that is not a string goes to the fallback ----------------


class ListRoute:
    """A custom classifier that answers a route as a list (e.g. the JSON of a multi-label model)."""

    async def classify(self, request: ClassifyRequest) -> ClassifyResult:
        return ClassifyResult(Classification(["billing"], 0.9, "ok", "custom"), stage="custom")  # type: ignore[arg-type]


def list_route_desk() -> Agent:
    billing = Agent("Billing.", name="billing", model=ScriptedModel(["billing answered"]))
    general = Agent("General.", name="general", model=ScriptedModel(["general answered"]))
    routes = [RouterRoute("billing", billing, "payments"), RouterRoute("general", general, "anything else")]
    return Agent("Desk.", name="desk", architecture=Router(routes, fallback_route="general", classifier=ListRoute()))


@pytest.mark.anyio
async def test_a_custom_classifiers_unhashable_route_goes_to_the_fallback_not_a_type_error() -> None:
    result = await list_route_desk().run("I was charged twice")
    assert (result.status, result.route, result.fallback_reason) == ("fallback", "general", "unknown_route")
    assert result.output == "general answered"


@pytest.mark.anyio
async def test_an_unhashable_route_is_reported_as_unknown_in_the_classified_event() -> None:
    events = await capture_events(list_route_desk(), "I was charged twice")
    classified = [e for e in events if isinstance(e, RouterClassified)]
    assert [(e.route, e.status) for e in classified] == [(None, "unknown_route")]


@pytest.mark.anyio
async def test_a_cascade_whose_first_stage_answers_an_unhashable_route_asks_its_second_stage() -> None:
    from jeeves_router.classify.cascade import CascadeClassifier
    from jeeves_router.testing import StaticClassifier

    cascade = CascadeClassifier(ListRoute(), StaticClassifier("billing", confidence=0.9))
    billing = Agent("Billing.", name="billing", model=ScriptedModel(["billing answered"]))
    general = Agent("General.", name="general", model=ScriptedModel(["general answered"]))
    routes = [RouterRoute("billing", billing, "payments"), RouterRoute("general", general, "anything else")]
    desk = Agent("Desk.", name="desk", architecture=Router(routes, fallback_route="general", classifier=cascade))
    result = await desk.run("I was charged twice")
    assert (result.status, result.route, result.output) == ("ok", "billing", "billing answered")
    assert cascade.stats.second == 1


# -- a capability that runs twice in one plan runs its tools twice, whatever its name's length --

LONG_NAME = "account_balance_lookup_for_the_customers_ledger"  # 47 characters: no room for "-1" within 48


def balance_desk(name: str, runtime: JournalRuntime | None) -> tuple[Agent, list[int]]:
    """Read a balance, move 40 out, read it again: the second read must see the transfer."""
    balance, reads = {"A": 100}, []

    @tool
    def get_balance(account: str) -> str:
        """The balance of an account."""
        reads.append(balance[account])
        return str(balance[account])

    async def transfer(call: CapabilityCall) -> str:
        balance["A"] -= 40
        return "moved 40"

    def reader_turn(request: ModelRequest) -> Reply:
        last = request.messages[-1]
        if last.role == "tool":
            return Reply(text=f"balance is {last.parts[0].content}")  # type: ignore[union-attr]
        return Reply(calls=[Call("get_balance", {"account": "A"})])

    steps = [(name, "read the balance"), ("transfer", "move 40"), (name, "read the balance again")]
    plan = json.dumps({"steps": [{"capability": c, "task": t} for c, t in steps]})

    def orchestrator(request: ModelRequest) -> Reply:
        return Reply(text="yes" if "Capability:" in (request.system or "") else plan)

    reader = Agent(
        "Read balances.", name="reader", model=FunctionModel(reader_turn, name="reader"), tools=[get_balance]
    )
    caps = [Capability(name, reader, "reads balances"), Capability("transfer", transfer, "moves money")]
    model = FunctionModel(orchestrator, name="orchestrator")
    agent = Agent("Accounts.", name="accounts", model=model, architecture=Capabilities(caps), runtime=runtime)
    return agent, reads


@pytest.mark.anyio
@pytest.mark.parametrize("journaled", [False, True], ids=["ledger", "journal"])
@pytest.mark.parametrize("name", [LONG_NAME, "balance"], ids=["47-char-name", "short-name"])
async def test_a_capability_run_twice_in_one_plan_reads_afresh_the_second_time(
    name: str, journaled: bool, tmp_path: Path
) -> None:
    runtime = JournalRuntime(SQLiteJournal(tmp_path / "j.db")) if journaled else None
    agent, reads = balance_desk(name, runtime)
    events = await capture_events(agent, "check, move, check")
    assert events[-1].result.output == "balance is 60"  # type: ignore[union-attr]
    assert reads == [100, 60]  # the tool ran at each step, not answered from the first step's call
    sessions = [e.session_id for e in events if isinstance(e, RunStarted) and e.path[-1] == name]
    assert len(sessions) == len(set(sessions)) == 2 and all(len(s.rsplit("__route_", 1)[1]) <= 48 for s in sessions)


# -- parallel tool calls from a local OpenAI-compatible server run as two calls ---------------


@pytest.mark.anyio
async def test_an_agent_on_ollama_runs_each_of_its_parallel_tool_calls(loopback: LoopbackServer) -> None:  # noqa: F811
    looked_up: list[str] = []

    @tool
    def lookup_invoice(id: str) -> str:
        """Find an invoice."""
        looked_up.append(id)
        return f"{id}: paid"

    calls = [
        wire.ToolCall("call_a", "lookup_invoice", '{"id": "INV-1"}'),
        wire.ToolCall("call_b", "lookup_invoice", '{"id": "INV-2"}'),
    ]
    loopback.script(wire.Reply(tool_calls=calls, reuse_tool_index=True), wire.Reply(text="Both are paid."))
    client = loopback.openai_client()
    model = OpenAIModel("llama3.1:8b", client=client, provider="ollama")
    agent = Agent("Billing.", name="billing", model=model, tools=[lookup_invoice])
    result = await agent.run("are INV-1 and INV-2 paid?")
    assert (result.output, looked_up) == ("Both are paid.", ["INV-1", "INV-2"])
    answers = [m for m in loopback.requests[1].body["messages"] if m["role"] == "tool"]
    assert [(m["tool_call_id"], m["content"]) for m in answers] == [
        ("call_a", "INV-1: paid"),
        ("call_b", "INV-2: paid"),
    ]


# -- a provider that fails every selection call is reported as itself -------------------------


async def echo(call: CapabilityCall) -> str:
    return call.task


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("status", "requests", "reason"),
    [(401, 2, "critical"), (503, 4, "retries_exhausted")],
    ids=["bad-key", "outage"],
)
async def test_selection_failing_on_every_capability_reports_the_providers_error(
    loopback: LoopbackServer,  # noqa: F811
    status: int,
    requests: int,
    reason: str,
) -> None:
    loopback.script(*[wire.Status(status)] * 8)
    policy = RetryPolicy(max_attempts=2, initial_delay_s=0.5, multiplier=2.0, jitter=0.0)
    client = loopback.openai_client()
    model = OpenAIModel("gpt-4.1-mini", client=client, retry=policy, sleep=RecordedSleeps(), rng=random.Random(0))
    caps = Capabilities([Capability("lookup", echo, "finds invoices"), Capability("refund", echo, "refunds")])
    result = await Agent("Accounts.", name="accounts", model=model, architecture=caps).run("refund INV-1")
    assert result.status == "critical"
    # the provider's failure, not "no capability was selected": a bad key, or an outage to retry later
    assert (result.report["error"]["type"], result.report["reason"]) == ("ModelError", reason)
    assert len(loopback.requests) == requests  # each selection call (and the adapter's retries) once, nothing more


@pytest.mark.anyio
async def test_selection_with_one_failed_call_still_skips_it() -> None:
    def selector(request: ModelRequest) -> Reply:
        if "Capability: lookup" in (request.system or ""):
            raise TimeoutError("read timed out")
        return Reply(text="yes" if "Capability:" in (request.system or "") else '{"steps": [{"capability": "refund"}]}')

    caps = Capabilities([Capability("lookup", echo, "finds invoices"), Capability("refund", echo, "refunds")])
    agent = Agent("Accounts.", name="accounts", model=FunctionModel(selector, name="m"), architecture=caps)
    result = await agent.run("refund INV-1")
    assert (result.status, result.output, result.metadata["capabilities"]) == ("ok", "refund", ("refund",))


# -- an agent with handoffs and its own ToolLoop (recovery on) still hands off -----------------


@pytest.mark.anyio
async def test_an_agent_with_handoffs_and_a_recovering_tool_loop_hands_off() -> None:
    billing = Agent("Billing.", name="billing", model=ScriptedModel(["Refund issued."]))
    failures = [TimeoutError("read timed out")]

    def triage_turn(request: ModelRequest) -> Reply:
        if failures:
            raise failures.pop()
        offered = [t.name for t in request.tools]
        assert offered == ["transfer_to_billing"], offered
        return Reply(calls=[Call("transfer_to_billing", {"reason": "a payment question"})])

    triage = Agent(
        "Send each request to the right desk.",
        name="triage",
        model=FunctionModel(triage_turn, name="triage"),
        handoffs=[billing],
        architecture=ToolLoop(recovery=Recovery(sleep=RecordedSleeps())),
    )
    events = await capture_events(triage, "I was charged twice")
    result = events[-1].result  # type: ignore[union-attr]
    assert (result.status, result.route, result.output) == ("ok", "billing", "Refund issued.")
    assert [e.operation for e in events if isinstance(e, RecoveryRetry)] == ["model"]  # the loop's recovery ran


# -- the model that explains a recovery report is paid for and journaled like any call --------

EXPLAIN_USAGE = Usage(input_tokens=40, output_tokens=12, requests=1, cost_usd=0.001)


def explainer(said: list[str]) -> FunctionModel:
    def explain(request: ModelRequest) -> Reply:
        said.append("Billing is down; please try again in an hour.")
        return Reply(text=said[-1], usage=EXPLAIN_USAGE)

    return FunctionModel(explain, name="explainer")


def rejecting(request: ModelRequest) -> Reply:
    raise ModelError("openai: HTTP 400 invalid_request_error", severity="critical")


@pytest.mark.anyio
async def test_a_tool_loops_explained_stop_counts_the_explanation_and_resumes_without_calling_it(
    tmp_path: Path,
) -> None:
    said: list[str] = []
    recovery = Recovery(explain_model=explainer(said), sleep=RecordedSleeps())
    agent = Agent(
        "Billing.",
        name="billing",
        model=FunctionModel(rejecting, name="billing"),
        architecture=ToolLoop(recovery=recovery),
        runtime=JournalRuntime(SQLiteJournal(tmp_path / "j.db")),
    )
    result = await agent.run("refund INV-1", session_id="s")
    assert (result.status, result.report["explanation"]) == ("critical", said[0])
    assert result.usage == EXPLAIN_USAGE + FAILED_USAGE  # the only model call that answered, and the refused one
    replayed = await agent.resume("s")
    assert len(said) == 1  # a resumed run makes no model call, the explanation's included
    assert (replayed.report["explanation"], replayed.usage) == (said[0], result.usage)


@pytest.mark.anyio
async def test_a_routers_explained_stop_counts_the_explanation_in_its_usage() -> None:
    said: list[str] = []
    billing = Agent("Billing.", name="billing", model=FunctionModel(rejecting, name="billing"))
    general = Agent("General.", name="general", model=ScriptedModel([]))
    routes = [RouterRoute("billing", billing, "payments"), RouterRoute("general", general, "anything else")]
    recovery = Recovery(explain_model=explainer(said), sleep=RecordedSleeps(), max_reclassifications=0)
    router = Router(routes, classifier=StaticClassifier("billing"), recovery=recovery)
    result = await Agent("Desk.", name="desk", architecture=router).run("refund INV-1")
    assert (result.status, result.report["explanation"]) == ("critical", said[0])
    assert result.usage == EXPLAIN_USAGE + FAILED_USAGE  # the explanation, and the request billing was refused
    assert sum(result.usage_by_route.values(), Usage()) == result.usage


# -- a conversation that used one specialist's tools goes on with an Anthropic one without tools --


@pytest.mark.anyio
async def test_a_follow_up_routed_to_an_anthropic_specialist_without_tools_sees_the_earlier_tool_turns(
    loopback: LoopbackServer,  # noqa: F811
) -> None:
    @tool
    def lookup_invoice(id: str) -> str:
        """Find an invoice."""
        return f"{id}: paid twice"

    loopback.script(
        wire.Reply(tool_calls=[wire.ToolCall("toolu_1", "lookup_invoice", '{"id": "INV-7"}')]),
        wire.Reply(text="INV-7 was paid twice; refunded."),
        wire.Reply(text="You're welcome!"),
    )
    client = loopback.anthropic_client()
    model = AnthropicModel("claude-haiku-4-5", client=client, retry=RetryPolicy(max_attempts=1))
    billing = Agent("Billing.", name="billing", model=model, tools=[lookup_invoice])
    general = Agent("General.", name="general", model=model)  # no tools
    routes = [RouterRoute("billing", billing, "payments"), RouterRoute("general", general, "anything else")]
    rules = {"INV": "billing", "thanks": "general"}
    desk = Agent("Desk.", name="desk", architecture=Router(routes, classifier=StaticClassifier(rules=rules)))
    first = await desk.run("INV-7 was charged twice", session_id="s")
    second = await desk.run("thanks!", session_id="s", history=first.messages)
    assert (second.status, second.route, second.output) == ("ok", "general", "You're welcome!")
    sent = json.dumps(loopback.requests[2].body["messages"])
    assert "tool_use" not in sent and "[result of lookup_invoice: INV-7: paid twice]" in sent
