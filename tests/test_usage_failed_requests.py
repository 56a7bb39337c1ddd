"""Every model request that was sent counts once in ``Usage.requests``, failed ones included.

A user reconciles ``result.usage`` with the provider's dashboard and rate limits, which count
every request the provider received. Through the loopback OpenAI and Anthropic wire servers:

* a refused request (HTTP 5xx) that the adapter retries: two requests, the answer's tokens,
  no cost for the refusal (not billed);
* a classifier call that fails then succeeds, and one whose retries run out;
* a streamed call that fails before its text and is retried, for both providers;
* a stream that breaks after some text: one request, the tokens the provider had reported
  (Anthropic reports the prompt's at the start), an unknown cost (the provider may bill it);
* a request that timed out: it counts, with an unknown cost;
* a connection that never opened sent nothing and counts none;
* the framework's own calls that fail: Capabilities' selection and plan, a report's explanation.
"""

from __future__ import annotations

import random
import socket
from typing import Any

import pytest

from jeeves_router import Agent
from jeeves_router.architectures.capabilities.architecture import Capabilities, Capability
from jeeves_router.architectures.react import ToolLoop
from jeeves_router.errors import ModelError
from jeeves_router.messages import user
from jeeves_router.models.anthropic import AnthropicModel
from jeeves_router.models.base import ModelRequest
from jeeves_router.models.openai import OpenAIModel
from jeeves_router.policies import RetryPolicy
from jeeves_router.recovery import Recovery
from jeeves_router.testing import FunctionModel, RecordedSleeps, ScriptedModel
from tests.loopback import Hang, LoopbackServer, Reply, Status, hang_once, loopback  # noqa: F401
from tests.test_capabilities import Brain, plan
from tests.test_engine_seams import recovering_desk

POLICY = RetryPolicy(max_attempts=3, initial_delay_s=0.5, multiplier=2.0, max_delay_s=5.0, jitter=0.0)
ANSWER = Reply(text=["Refund ", "issued."], input_tokens=12, output_tokens=5)
ROUTE = Reply(text="route: billing\nconfidence: 0.9", input_tokens=30, output_tokens=8)
REQUEST = ModelRequest(messages=(user("charged twice"),))


def model(server: LoopbackServer, provider: str = "openai", **client: Any) -> OpenAIModel | AnthropicModel:
    common: dict[str, Any] = {"retry": POLICY, "sleep": RecordedSleeps(), "rng": random.Random(0)}
    if provider == "anthropic":
        return AnthropicModel("claude-haiku-4-5", client=server.anthropic_client(**client), **common)
    return OpenAIModel("gpt-4.1-mini", client=server.openai_client(**client), **common)


def looping(m: Any) -> Agent:
    return Agent("Billing.", name="billing", model=m, architecture=ToolLoop(recovery=Recovery(sleep=RecordedSleeps())))


def desk(classifier_model: Any, billing_model: Any) -> Agent:
    return recovering_desk(classifier_model, Agent("Billing.", name="billing", model=billing_model))


@pytest.mark.anyio
async def test_a_refused_request_that_the_adapter_retries_counts(loopback: LoopbackServer) -> None:  # noqa: F811
    loopback.script(ANSWER)
    clean = (await model(loopback).request(REQUEST)).usage
    loopback.script(Status(500), ANSWER)
    used = (await model(loopback).request(REQUEST)).usage
    assert len(loopback.requests) == 3 and clean.requests == 1
    assert used.requests == 2  # the refused request and the answered one
    assert (used.input_tokens, used.output_tokens) == (12, 5)
    assert used.cost_usd == clean.cost_usd and clean.cost_usd  # a refusal is not billed


@pytest.mark.anyio
async def test_a_classifier_call_that_fails_then_succeeds_counts_both_requests(
    loopback: LoopbackServer,  # noqa: F811
) -> None:
    loopback.script(Status(503), ROUTE)
    result = await desk(model(loopback), ScriptedModel(["Done."])).run("charged twice")
    assert (result.status, result.route, len(loopback.requests)) == ("ok", "billing", 2)
    classified = result.usage_by_route["<classifier>"]
    assert (classified.requests, classified.input_tokens) == (2, 30)
    assert result.usage.requests == 3


@pytest.mark.anyio
async def test_a_classifier_whose_retries_ran_out_counts_every_request(loopback: LoopbackServer) -> None:  # noqa: F811
    loopback.responder = lambda req: Status(503)
    result = await desk(model(loopback), ScriptedModel([])).run("charged twice")
    assert result.status == "critical" and len(loopback.requests) == POLICY.max_attempts
    classified = result.usage_by_route["<classifier>"]
    assert (classified.requests, classified.total_tokens, classified.cost_usd) == (3, 0, 0.0)
    assert result.usage == classified


@pytest.mark.anyio
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_a_stream_refused_before_its_text_and_retried_counts_both_requests(
    loopback: LoopbackServer,  # noqa: F811
    provider: str,
) -> None:
    loopback.script(Status(529 if provider == "anthropic" else 503), ANSWER)
    result = await looping(model(loopback, provider)).run("charged twice")
    assert (result.status, result.output, len(loopback.requests)) == ("ok", "Refund issued.", 2)
    assert (result.usage.requests, result.usage.input_tokens, result.usage.output_tokens) == (2, 12, 5)
    assert result.usage.cost_usd  # the answer's, the refusal adding nothing


@pytest.mark.anyio
@pytest.mark.parametrize(("provider", "reported"), [("openai", 0), ("anthropic", 12)])
async def test_a_stream_broken_after_its_text_counts_its_request_and_reported_tokens(
    loopback: LoopbackServer,  # noqa: F811
    provider: str,
    reported: int,
) -> None:
    loopback.script(Reply(text=["Refund ", "iss", "ued."], input_tokens=12, disconnect_after=4))
    result = await looping(model(loopback, provider)).run("charged twice")
    assert result.status == "critical" and len(loopback.requests) == 1  # its text went out: not retried
    assert result.usage.requests == 1
    assert result.usage.input_tokens == reported  # Anthropic reports the prompt's tokens as the stream starts
    assert result.usage.cost_usd is None  # what a broken stream was billed is unknown


@pytest.mark.anyio
async def test_a_request_that_timed_out_counts_with_an_unknown_cost(loopback: LoopbackServer) -> None:  # noqa: F811
    m = model(loopback, timeout=0.5)
    loopback.script(hang_once(m._client), ANSWER)  # the adapter's copy of the client
    result = await looping(m).run("charged twice")
    assert (result.status, len(loopback.requests)) == ("ok", 2)
    assert (result.usage.requests, result.usage.input_tokens) == (2, 12)
    assert result.usage.cost_usd is None  # the provider may have billed the request it never answered


@pytest.mark.anyio
async def test_a_connection_that_never_opened_counts_no_request() -> None:
    # A port nothing listens on: kept bound (not listening) for the whole test, so that no other
    # process can take it and answer; a bound port refuses connections.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        m = OpenAIModel(
            "gpt-4.1-mini",
            base_url=f"http://127.0.0.1:{port}/v1",
            api_key="sk-none",
            retry=POLICY,
            sleep=RecordedSleeps(),
            rng=random.Random(0),
        )
        try:
            with pytest.raises(ModelError) as caught:
                await m.request(REQUEST)
        finally:
            await m.aclose()
    assert caught.value.metadata["kind"] == "connection" and caught.value.attempt == POLICY.max_attempts
    spent = getattr(caught.value, "spent_usage", None)
    assert spent is None or spent.requests == 0


# -- the framework's own model calls: Capabilities' selection and plan, a report's explanation ----


@pytest.mark.anyio
async def test_capabilities_count_the_dropped_requests_of_their_selection_and_plan() -> None:
    brain = Brain(yes={"pay"}, plans=[plan("pay")])
    drops = {"select": 1, "plan": 1}

    def answer(request: ModelRequest) -> str:
        system = request.system or ""
        kind = "select" if system.startswith("You decide whether") else "plan" if system.startswith("You plan") else ""
        if drops.get(kind):
            drops[kind] -= 1
            raise TimeoutError("dropped")
        return brain._answer(request)

    brain_model = FunctionModel(answer, name="brain")
    pay = Agent("Payments.", name="pay", model=ScriptedModel(["Paid."]))
    arch = Capabilities([Capability("pay", pay, "payments")], recovery=Recovery(sleep=RecordedSleeps()))
    result = await Agent("O", name="desk", model=brain_model, architecture=arch).run("pay")
    assert result.status == "ok" and drops == {"select": 0, "plan": 0}
    assert result.usage_by_route["<classifier>"].requests == 2  # the dropped selection call, and its retry
    assert result.usage_by_route["<orchestrator>"].requests == brain.calls["plan"] + brain.calls["extract"] + 1
    assert result.usage.requests == len(brain_model.requests) + 1  # and the pay agent's


@pytest.mark.anyio
async def test_a_refused_explanation_counts_its_request() -> None:
    def refusing(request: ModelRequest) -> str:
        raise ModelError("HTTP 400 invalid_request_error", severity="critical")

    recovery = Recovery(explain_model=FunctionModel(refusing, name="explainer"), sleep=RecordedSleeps())
    agent = Agent("B.", name="billing", model=FunctionModel(refusing), architecture=ToolLoop(recovery=recovery))
    result = await agent.run("refund INV-1")
    assert result.status == "critical" and "explanation" not in result.report
    assert result.usage.requests == 2  # the refused model call and the refused explanation
