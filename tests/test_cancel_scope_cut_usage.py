"""A run cut by the caller's cancel scope while a request waits for its answer counts that request.

The request was sent (the provider may bill it). A time box, the HTTP server and
``RunStream.aclose`` each open a :func:`~jeeves_router.usage.cut_requests` scope, so the
request they cut off counts. A cancel scope of the caller's own (``anyio.move_on_after``
around ``desk.run``, a task group cancelled) opened none: before the fix the journal's
``run.end`` ``cut`` said nothing of the request (a classification cut mid-request recorded
``requests == 0``) and ``RunStream.spent`` left it out, though a stream closed at the same
point counted it; the requests of concurrent tasks (Capabilities' selections) were lost either
way, the tasks having started before any scope was opened. Real ``openai`` / ``anthropic``
clients on the loopback server: the server records each request it received, and the hung
ones are never answered.
"""

from __future__ import annotations

import gc
import threading
from dataclasses import asdict
from pathlib import Path

import anyio
import pytest

from jeeves_router import Agent, Router, RouterRoute
from jeeves_router.agent import RunStream
from jeeves_router.architectures.capabilities.architecture import Capabilities, Capability
from jeeves_router.classify import LLMClassifier
from jeeves_router.journal import JournalRuntime, SQLiteJournal
from jeeves_router.journal.base import Journal
from jeeves_router.journal.records import RunEndRecord
from jeeves_router.models.anthropic import AnthropicModel
from jeeves_router.models.openai import OpenAIModel
from jeeves_router.policies import RetryPolicy
from jeeves_router.recovery import Recovery
from jeeves_router.testing import RecordedSleeps
from tests.loopback import Hang, LoopbackServer, RecordedRequest, Reply, ToolCall, loopback  # noqa: F401
from tests.task_helpers import finish_generator_closes, pending_tasks, settled_tasks, warnings_of_this_test
from tests.test_capabilities import Fn
from tests.test_seams_lifecycle import cancelled_once

CLASSIFIED = Reply(text="route: billing\nconfidence: 0.9")
LOOKUP = Reply(tool_calls=[ToolCall("c1", "lookup", '{"invoice": "INV-7"}')])
ANSWER = Reply(text=["INV-7 ", "was paid twice."])


def desk(server: LoopbackServer, journal: Journal | None, provider: str, recovery: Recovery | None = None) -> Agent:
    """An LLM-classified desk whose billing specialist looks an invoice up, then answers."""
    from jeeves_router import tool

    @tool(repeatable=True)
    def lookup(invoice: str) -> str:
        """Look up an invoice."""
        return f"{invoice}: paid twice"

    policy = RetryPolicy(max_attempts=2, initial_delay_s=0.5, jitter=0.0)
    classifier = OpenAIModel("gpt-4.1-nano", client=server.openai_client(), retry=policy, sleep=RecordedSleeps())
    model = (
        OpenAIModel("gpt-4.1-mini", client=server.openai_client(), retry=policy, sleep=RecordedSleeps())
        if provider == "openai"
        else AnthropicModel("claude-haiku-4-5", client=server.anthropic_client(), retry=policy, sleep=RecordedSleeps())
    )
    billing = Agent("Billing.", name="billing", model=model, tools=[lookup])
    router = Router(
        [RouterRoute("billing", billing, "payments"), RouterRoute("general", Agent("G.", name="general", model=model))],
        classifier=LLMClassifier(classifier),
        recovery=recovery or Recovery(sleep=RecordedSleeps()),
    )
    runtime = JournalRuntime(journal) if journal is not None else None
    return Agent("Desk", name="desk", runtime=runtime, architecture=router)


def script(server: LoopbackServer, where: str, reached: threading.Event) -> None:
    """The replies up to the request that hangs (``reached`` is set as the server takes it)."""

    def hang(request: RecordedRequest) -> Hang:
        reached.set()
        return Hang()

    before = {"classification": [], "specialist": [CLASSIFIED], "specialist after a tool": [CLASSIFIED, LOOKUP]}
    server.script(*before[where], hang)


async def cut(reached: threading.Event, agent: Agent, how: str) -> RunStream | None:
    """Run (or stream) until ``reached``, then cancel the caller's scope; returns the stream."""
    streams: list[RunStream] = []

    async def body() -> None:
        if how == "run":
            await agent.run("I was charged twice for INV-7", session_id="s")
            return
        async with agent.stream("I was charged twice for INV-7", session_id="s") as events:
            streams.append(events)
            async for _ in events:
                pass

    seen = anyio.Event()

    async def bridge() -> None:  # set by the server's thread as it takes the request: polled from this loop
        while not reached.is_set():  # noqa: ASYNC110
            await anyio.sleep(0.01)
        seen.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(bridge)
        scope = await cancelled_once(seen, body)
    assert scope.cancelled_caught
    return streams[0] if streams else None


@pytest.mark.anyio
@pytest.mark.parametrize("how", ["run", "stream"])
@pytest.mark.parametrize(
    ("where", "provider"),
    [
        ("classification", "openai"),  # the classifier's model is OpenAI's
        ("specialist", "openai"),
        ("specialist", "anthropic"),
        ("specialist after a tool", "openai"),
        ("specialist after a tool", "anthropic"),
    ],
)
async def test_a_request_cut_by_the_callers_cancel_scope_counts_in_the_journals_cut_and_the_stream(
    loopback: LoopbackServer,  # noqa: F811
    tmp_path: Path,
    provider: str,
    how: str,
    where: str,
) -> None:
    journal = SQLiteJournal(tmp_path / "j.db")
    reached = threading.Event()
    script(loopback, where, reached)
    agent = desk(loopback, journal, provider)
    before = await settled_tasks()
    with warnings_of_this_test("error"):
        stream = await cut(reached, agent, how)
        await loopback.aclose_clients()
        gc.collect()
        await finish_generator_closes(before)
    assert pending_tasks() <= before
    sent = len(loopback.requests)
    [end] = [e.record for e in await journal.read("s", types=("run.end",))]
    assert isinstance(end, RunEndRecord) and end.status == "cut" and end.usage is not None
    assert end.usage["requests"] == sent  # the hung one too: it was sent (it was left out)
    assert end.usage["cost_usd"] is None  # what the provider bills for it is unknown
    if stream is not None:
        assert end.usage == asdict(stream.spent)  # the stream says what the journal says


@pytest.mark.anyio
async def test_a_run_cut_inside_a_time_box_still_counts_its_request_once(
    loopback: LoopbackServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    """The time box's own scope takes the cut request (its ``TimeoutError`` carries it); the stream adds it once."""
    script(loopback, "classification", threading.Event())
    recovery = Recovery(time_limit_s=0.5, sleep=RecordedSleeps())
    agent = desk(loopback, SQLiteJournal(tmp_path / "j.db"), "openai", recovery)
    stream = agent.stream("I was charged twice for INV-7", session_id="s")
    async with stream:
        events = [ev async for ev in stream]
    result = events[-1].result  # type: ignore[union-attr]
    assert result.status == "critical" and result.report["reason"] == "time_limit"
    assert result.usage.requests == stream.spent.requests == len(loopback.requests) == 1


@pytest.mark.anyio
@pytest.mark.parametrize("how", ["run", "stream"])
async def test_concurrent_selection_requests_cut_by_the_callers_cancel_scope_each_count(
    loopback: LoopbackServer,  # noqa: F811
    tmp_path: Path,
    how: str,
) -> None:
    """Capabilities classify in tasks of their own: what the cut leaves them reports to the run's stream too."""
    reached = threading.Event()

    def hang(request: RecordedRequest) -> Hang:
        if len(loopback.requests) == 2:  # both selections are waiting
            reached.set()
        return Hang()

    loopback.script(hang, hang)
    model = OpenAIModel("gpt-4.1-nano", client=loopback.openai_client(), retry=RetryPolicy(max_attempts=1))
    capabilities = [Capability("sales", Fn("120 units"), "sales figures"), Capability("stock", Fn("8"), "stock")]
    journal = SQLiteJournal(tmp_path / "j.db")
    arch = Capabilities(capabilities, recovery=Recovery(sleep=RecordedSleeps()))
    agent = Agent("Analyst.", name="analyst", model=model, architecture=arch, runtime=JournalRuntime(journal))
    stream = await cut(reached, agent, how)
    [end] = [e.record for e in await journal.read("s", types=("run.end",))]
    assert isinstance(end, RunEndRecord) and end.usage is not None
    assert end.usage["requests"] == len(loopback.requests) == 2  # both were sent (neither counted)
    if stream is not None:
        assert end.usage == asdict(stream.spent)
