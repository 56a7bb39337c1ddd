"""Regression tests for the defects found at the seams between layers (issue 14, items 1-8).

Each test reproduces one defect of the first release with a few lines: scripted models, the
loopback server and a journal.
"""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path
from typing import Any, get_args

import pytest

from jeeves_router import Agent, Router, RouterRoute, UsageError, tool
from jeeves_router.architectures.router import HandoffRouter
from jeeves_router.classify.types import Classification, ClassifyRequest, ClassifyResult
from jeeves_router.events import RouterFallback, RunFailed, RunStarted
from jeeves_router.journal import JournalRuntime, SQLiteJournal
from jeeves_router.models.openai import OpenAIModel
from jeeves_router.policies import RetryPolicy
from jeeves_router.recovery import Recovery
from jeeves_router.testing import Call, RecordedSleeps, ScriptedModel, StaticClassifier
from tests.loopback import LoopbackServer, RecordedRequest, Status, loopback  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]
ROUTE = "route: billing\nconfidence: 0.9"
POLICY = RetryPolicy(max_attempts=3, initial_delay_s=0.5, multiplier=2.0, max_delay_s=5.0, jitter=0.0)


def openai_model(server: LoopbackServer, sleeps: RecordedSleeps) -> OpenAIModel:
    return OpenAIModel("gpt-4.1-mini", client=server.openai_client(), retry=POLICY, sleep=sleeps, rng=random.Random(0))


# -- 1. retries multiply ------------------------------------------------------------------


@pytest.mark.anyio
async def test_1_an_adapter_exhausted_specialist_error_is_not_retried_by_the_router(
    loopback: LoopbackServer,  # noqa: F811
) -> None:
    loopback.responder = lambda req: Status(503)
    sleeps = RecordedSleeps()
    billing = Agent("Billing.", name="billing", model=openai_model(loopback, sleeps))
    general = Agent("General.", name="general", model=ScriptedModel([]))
    desk = Agent(
        "Desk",
        name="desk",
        architecture=Router(
            [RouterRoute("billing", billing), RouterRoute("general", general)],
            classifier=StaticClassifier("billing"),
            recovery=Recovery(sleep=sleeps),
        ),
    )
    result = await desk.run("charged twice")
    assert result.status == "critical"
    assert result.report is not None and result.report["reason"] == "retries_exhausted"
    assert len(loopback.requests) == POLICY.max_attempts  # the adapter's 3, never 3 x 3


@pytest.mark.anyio
async def test_1_an_adapter_exhausted_classifier_error_is_not_retried_by_the_router(
    loopback: LoopbackServer,  # noqa: F811
) -> None:
    loopback.responder = lambda req: Status(503)
    sleeps = RecordedSleeps()
    billing = Agent("Billing.", name="billing", model=ScriptedModel([]))
    desk = Agent(
        "Desk",
        name="desk",
        model=openai_model(loopback, sleeps),
        architecture=Router([RouterRoute("billing", billing)], recovery=Recovery(sleep=sleeps)),
    )
    result = await desk.run("charged twice")
    assert result.status == "critical"
    assert len(loopback.requests) == POLICY.max_attempts  # never 3 x 2


@pytest.mark.anyio
async def test_1_an_adapter_exhausted_error_is_not_retried_by_the_tool_loop(
    loopback: LoopbackServer,  # noqa: F811
) -> None:
    from jeeves_router.architectures.react import ToolLoop

    loopback.responder = lambda req: Status(503)
    sleeps = RecordedSleeps()
    agent = Agent(
        "Billing.",
        name="billing",
        model=openai_model(loopback, sleeps),
        architecture=ToolLoop(recovery=Recovery(sleep=sleeps)),
    )
    result = await agent.run("charged twice")
    assert result.status == "critical"
    assert len(loopback.requests) == POLICY.max_attempts


# -- 2. run() never answers a new request from the journal ---------------------------------


def transfer_desk(journal: SQLiteJournal, transfers: list[str]) -> Agent:
    @tool
    def send(amount: int, to: str) -> str:
        """Send money."""
        transfers.append(f"{amount}->{to}")
        return "sent"

    model = ScriptedModel([Call("send", {"amount": 10, "to": "bob"}), "Sent $10."])
    return Agent("Payments.", name="payments", model=model, tools=[send], runtime=JournalRuntime(journal))


@pytest.mark.anyio
async def test_2_run_with_a_recorded_prompt_runs_live(tmp_path: Path) -> None:
    journal = SQLiteJournal(tmp_path / "j.db")
    transfers: list[str] = []
    first = await transfer_desk(journal, transfers).run("send 10 to bob", session_id="s")
    # a new process: a new runtime over the same journal, the same session and prompt
    again = transfer_desk(journal, transfers)
    second = await again.run("send 10 to bob", session_id="s")
    assert first.output == second.output == "Sent $10."
    assert transfers == ["10->bob", "10->bob"]  # the second transfer the user asked for happened
    assert again.model.remaining == 0  # type: ignore[union-attr]


# -- 3. resume() of a completed HandoffRouter session makes no model call -------------------


def handoff_desk(journal: SQLiteJournal, router_steps: list[Any], billing_steps: list[Any]) -> Agent:
    billing = Agent("You resolve payments.", name="billing", model=ScriptedModel(billing_steps, name="billing"))
    general = Agent("You answer the rest.", name="general", model=ScriptedModel([], name="general"))
    return Agent(
        "Support desk",
        name="desk",
        model=ScriptedModel(router_steps, name="router"),
        architecture=HandoffRouter([RouterRoute("billing", billing, "payments"), RouterRoute("general", general)]),
        runtime=JournalRuntime(journal),
    )


@pytest.mark.anyio
async def test_3_resuming_a_completed_sticky_handoff_session_calls_no_model(tmp_path: Path) -> None:
    journal = SQLiteJournal(tmp_path / "j.db")
    live = handoff_desk(
        journal,
        [Call("classify_as_billing", {"reason": "money", "confidence": 0.9})],
        ["Refunded.", "The refund takes 3 days."],
    )
    r1 = await live.run("I was charged twice", session_id="h")
    r2 = await live.run("when will I see it?", session_id="h", history=r1.messages)
    assert r2.metadata["sticky"] is True and r2.output == "The refund takes 3 days."
    # a new process: fresh session store, models that fail if called
    replay = handoff_desk(journal, [], [])
    result = await replay.resume("h")
    assert result.output == r2.output and result.route == "billing"
    assert replay.model.requests == []  # type: ignore[union-attr]


# -- 4. a framework retry never executes a completed tool call again ------------------------


def refund_desk(refunds: list[str]) -> tuple[Agent, ScriptedModel, ScriptedModel]:
    @tool
    def refund(invoice: str) -> str:
        """Refund an invoice."""
        refunds.append(invoice)
        return f"refunded {invoice}"

    classifier = ScriptedModel([ROUTE], name="classifier")
    billing_model = ScriptedModel(
        [Call("refund", {"invoice": "INV-7"}), TimeoutError("dropped"), Call("refund", {"invoice": "INV-7"}), "Done."],
        name="billing",
    )
    billing = Agent("Billing.", name="billing", model=billing_model, tools=[refund])
    return recovering_desk(classifier, billing), classifier, billing_model


def recovering_desk(classifier: ScriptedModel, billing: Agent) -> Agent:
    """A billing + general desk under ``Recovery`` whose backoff waits are recorded, not slept."""
    general = Agent("General.", name="general", model=ScriptedModel([]))
    return Agent(
        "Desk",
        name="desk",
        model=classifier,
        architecture=Router(
            [RouterRoute("billing", billing), RouterRoute("general", general)],
            recovery=Recovery(sleep=RecordedSleeps()),
        ),
    )


@pytest.mark.anyio
async def test_4_a_router_retry_does_not_refund_twice() -> None:
    refunds: list[str] = []
    desk, _, billing_model = refund_desk(refunds)
    result = await desk.run("refund INV-7")
    assert result.status == "ok" and result.output == "Done."
    assert refunds == ["INV-7"]
    billing_model.assert_complete()


# -- 5. usage of failed attempts counts ------------------------------------------------------


@pytest.mark.anyio
async def test_5_usage_counts_every_model_response_including_failed_attempts() -> None:
    desk, classifier, billing_model = refund_desk([])
    result = await desk.run("refund INV-7")
    assert len(classifier.requests) + len(billing_model.requests) == 5  # one of them raised
    assert result.usage.requests == 5  # every request sent, the one that raised included
    assert result.usage_by_route["billing"].requests == 4
    assert result.usage_by_route["<classifier>"].requests == 1
    assert result.usage.input_tokens == 4 * 10  # the failed request reported no tokens


@pytest.mark.anyio
@pytest.mark.parametrize("recovers", [True, False])
async def test_5_a_classification_that_fails_after_a_paid_format_retry_still_counts_its_reply(
    recovers: bool,
) -> None:
    # attempt 1: an unreadable reply (paid), then its format retry is dropped; attempt 2 routes
    script: list[Any] = ["I think billing?", TimeoutError("dropped")]
    script += [ROUTE] if recovers else [TimeoutError("dropped"), TimeoutError("dropped")]
    classifier = ScriptedModel(script, name="classifier")
    billing = Agent("Billing.", name="billing", model=ScriptedModel(["Done."], name="billing"))
    desk = recovering_desk(classifier, billing)
    result = await desk.run("refund INV-7")
    paid = 2 if recovers else 1  # classifier replies that came back
    assert result.status == ("ok" if recovers else "critical")
    # every classifier request counts, the dropped ones too; only the replies that came back have tokens
    assert result.usage_by_route["<classifier>"].requests == len(classifier.requests) == 3
    assert result.usage_by_route["<classifier>"].input_tokens == paid * 10
    assert result.usage.requests == len(classifier.requests) + (1 if recovers else 0)


# -- 6. stream() raises like run() ----------------------------------------------------------


@pytest.mark.anyio
async def test_6_a_failed_stream_raises_after_its_run_failed_event() -> None:
    agent = Agent("x", name="solo", model=ScriptedModel([RuntimeError("boom")]))
    seen: list[Any] = []
    with pytest.raises(RuntimeError, match="boom"):
        async for ev in agent.stream("hi"):
            seen.append(ev)
    assert [type(e) for e in seen] == [RunStarted, RunFailed]


# -- 7. smaller seams ------------------------------------------------------------------------


def test_7_a_routed_specialist_with_its_own_runtime_is_refused(tmp_path: Path) -> None:
    runtime = JournalRuntime(SQLiteJournal(tmp_path / "j.db"))
    billing = Agent("Billing.", name="billing", model=ScriptedModel([]), runtime=runtime)
    with pytest.raises(UsageError, match="runtime"):
        Agent("Desk", name="desk", model=ScriptedModel([]), architecture=Router([RouterRoute("billing", billing)]))


@pytest.mark.anyio
async def test_7_a_generator_route_table_reaches_the_classifier() -> None:
    billing = Agent("Billing.", name="billing", model=ScriptedModel(["Refunded."]))
    classifier = StaticClassifier("billing")
    router = Router((RouterRoute(n, a) for n, a in [("billing", billing)]), classifier=classifier)
    result = await Agent("Desk", name="desk", architecture=router).run("charged twice")
    assert result.route == "billing"
    assert [s.name for s in classifier.requests[0].routes] == ["billing"]


def test_7_star_import_works_without_numpy() -> None:
    code = "import sys; sys.modules['numpy'] = None\nfrom jeeves_router import *\nassert 'Agent' in dir()\n"
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env={"PYTHONPATH": str(ROOT)}, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr


def test_7_no_event_is_exported_that_is_never_emitted() -> None:
    import jeeves_router.events as events

    assert not hasattr(events, "StreamRestarted")
    kinds = {cls.__dataclass_fields__["kind"].default for cls in get_args(events.Event)}
    assert "stream.restarted" not in kinds


# -- 8. out-of-range confidences never dispatch -----------------------------------------------


class OverConfident:
    """A custom classifier that answers outside its contract (confidence 1.5)."""

    async def classify(self, request: ClassifyRequest) -> ClassifyResult:
        return ClassifyResult(Classification("billing", 1.5, "ok", "custom"))


@pytest.mark.anyio
async def test_8_a_custom_classifier_confidence_above_one_goes_to_the_fallback() -> None:
    billing = Agent("Billing.", name="billing", model=ScriptedModel([]))
    general = Agent("General.", name="general", model=ScriptedModel(["Hello."]))
    router = Router(
        [RouterRoute("billing", billing), RouterRoute("general", general)],
        classifier=OverConfident(),
        fallback_route="general",
    )
    result = await Agent("Desk", name="desk", architecture=router).run("charged twice")
    assert result.route == "general" and result.status == "fallback"
    assert result.fallback_reason == "invalid_confidence"
    assert result.confidence is None


@pytest.mark.anyio
async def test_8_a_handoff_router_confidence_out_of_range_goes_to_the_fallback() -> None:
    billing = Agent("Billing.", name="billing", model=ScriptedModel([]))
    general = Agent("General.", name="general", model=ScriptedModel(["Hello."]))
    router_model = ScriptedModel([Call("classify_as_billing", {"reason": "money", "confidence": 7})] * 10)
    desk = Agent(
        "Desk",
        name="desk",
        model=router_model,
        architecture=HandoffRouter(
            [RouterRoute("billing", billing), RouterRoute("general", general)], fallback_route="general"
        ),
    )
    events = [ev async for ev in desk.stream("charged twice")]
    result = events[-1].result  # type: ignore[union-attr]
    assert result.route == "general" and result.status == "fallback"
    assert result.fallback_reason == "invalid_confidence"
    assert len(router_model.requests) == 1
    assert any(isinstance(e, RouterFallback) and e.reason == "invalid_confidence" for e in events)


# -- import weight (no timing: which modules load) ----------------------------------------------


def test_importing_the_package_loads_no_journal_pydantic_or_provider_sdk() -> None:
    code = (
        "import sys, jeeves_router\n"
        "from jeeves_router import Agent, Router, RouterRoute, tool\n"
        "heavy = ('jeeves_router.journal', 'sqlite3', 'pydantic', 'openai', 'anthropic', 'numpy',\n"
        "         'jeeves_router.testing')\n"
        "print(','.join(m for m in heavy if m in sys.modules))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env={"PYTHONPATH": str(ROOT)}, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ""
