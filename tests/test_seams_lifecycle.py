"""Seams: closing, cancelling and sharing journaled runs.

* ``break`` + ``aclose()`` of ``agent.stream()`` at each stage of a routed run (before and
  after classification, inside a handoff chain, during a specialist's stream, at a
  recovery retry) with a journal: no warning, no task left, the run stays unfinished in
  the journal, and ``resume`` then finishes it.
* A cancel scope around ``run()`` and ``stream()``, cancelled while a model streams or a
  recovery backoff waits: cancelled at once, the model stream closed, the journal
  consistent.
* Two journal instances (then two processes) on one SQLite file and one session id: no
  request is answered from another run, nothing is lost, resume picks the last run.
* Sticky sessions, typed context, a history mode and a handoff across turns, one of which
  fails: every turn resumes to its own result.
"""

from __future__ import annotations

import gc
import subprocess
import sys
import textwrap
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest
from pydantic import BaseModel

from jeeves_router import Agent, Router, RouterRoute, tool
from jeeves_router.errors import ModelError
from jeeves_router.events import Event, RecoveryRetry, RunCompleted
from jeeves_router.journal import JournalRuntime, SQLiteJournal, ToolOutcomeUnknown
from jeeves_router.journal.resume import read_runs
from jeeves_router.messages import TextPart
from jeeves_router.models.base import ModelRequest, ModelResponse, ModelStreamItem, ModelTextDelta
from jeeves_router.policies import RetryPolicy
from jeeves_router.recovery import Recovery
from jeeves_router.testing import Call, Chunks, FunctionModel, Reply, ScriptedModel, StaticClassifier
from jeeves_router.tools import ContextUpdate, ToolContext
from jeeves_router.usage import Usage
from tests.task_helpers import pending_tasks, settled_tasks, warnings_of_this_test

ROOT = Path(__file__).resolve().parents[1]


class Slow:
    """Streams ``chunks`` with ``delay`` before each; the first call fails if ``fail_first``; counts closes.

    ``waiting`` is set when a call starts its first wait.
    """

    def __init__(self, chunks: list[str], *, delay: float = 0.0, fail_first: bool = False) -> None:
        self.chunks, self.delay, self.fail_first = chunks, delay, fail_first
        self.calls = 0
        self.closed = 0
        self.waiting = anyio.Event()

    @property
    def name(self) -> str:
        return "test:slow"

    async def request(self, request: ModelRequest) -> ModelResponse:
        raise NotImplementedError

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        self.calls += 1
        try:
            if self.fail_first and self.calls == 1:
                raise ModelError("overloaded", severity="retriable")
            for c in self.chunks:
                self.waiting.set()
                await anyio.sleep(self.delay)
                yield ModelTextDelta(c)
            yield ModelResponse((TextPart("".join(self.chunks)),), Usage(requests=1), "end", "test")
        finally:
            self.closed += 1


def routed(journal: SQLiteJournal, model: object, *, recovery: Recovery | None = None) -> Agent:
    billing = Agent("Billing.", name="billing", model=model)  # type: ignore[arg-type]
    router = Router([RouterRoute("billing", billing)], classifier=StaticClassifier("billing"), recovery=recovery)
    return Agent("Desk", name="desk", runtime=JournalRuntime(journal), architecture=router)


def chained(journal: SQLiteJournal) -> Agent:
    refunds = Agent("Refunds.", name="refunds", model=ScriptedModel([Chunks("Refund ", "done.")]))
    transfer = Call("transfer_to_refunds", {"reason": "a refund"})
    billing = Agent("Billing.", name="billing", model=ScriptedModel([transfer]), handoffs=[refunds])
    router = Router([RouterRoute("billing", billing)], classifier=StaticClassifier("billing"), recovery=Recovery())
    return Agent("Desk", name="desk", runtime=JournalRuntime(journal), architecture=router)


async def no_wait(delay: float) -> None:
    """A backoff that does not wait."""


class Waits:
    """A backoff that really waits (``anyio.sleep``, cancellable) and sets ``waiting`` as it starts."""

    def __init__(self) -> None:
        self.waiting = anyio.Event()

    async def __call__(self, delay: float) -> None:
        self.waiting.set()
        await anyio.sleep(delay)


async def cancelled_once(reached: anyio.Event, body: Callable[[], Awaitable[object]]) -> anyio.CancelScope:
    """Run ``body`` in a scope that is cancelled once ``reached`` is set (never if ``body`` ends first)."""
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:

            async def cancel() -> None:
                await reached.wait()
                scope.cancel()

            tg.start_soon(cancel)
            await body()
            tg.cancel_scope.cancel()
    return scope


async def run_ends(journal: SQLiteJournal, session_id: str) -> list[str]:
    return [e.record.status for e in await journal.read(session_id, types=("run.end",))]  # type: ignore[union-attr]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("desk", "stop_at", "nth"),
    [
        ("routed", "run.started", 1),  # before classification
        ("routed", "router.classified", 1),
        ("routed", "text.delta", 1),  # during the specialist's stream
        ("retrying", "recovery.retry", 1),  # before the retry's backoff
        ("chain", "tool.called", 1),  # the handoff call, before the transfer
        ("chain", "handoff.completed", 1),
        ("chain", "run.started", 3),  # the handoff target started
        ("chain", "text.delta", 1),  # the handoff target streams
    ],
)
async def test_closing_a_journaled_stream_at_each_stage_is_clean_and_resumable(
    tmp_path: Path, desk: str, stop_at: str, nth: int
) -> None:
    journal = SQLiteJournal(tmp_path / "j.db")

    def build() -> Agent:
        if desk == "chain":
            return chained(journal)
        return routed(
            journal, Slow(["Refund ", "done."], fail_first=desk == "retrying"), recovery=Recovery(sleep=no_wait)
        )

    agent = build()
    before = await settled_tasks()
    with warnings_of_this_test("error"):
        stream = agent.stream("refund me", session_id="s")
        seen = 0
        async for ev in stream:
            seen += ev.kind == stop_at
            if seen == nth:
                break
        await stream.aclose()
        gc.collect()
    assert seen == nth
    assert pending_tasks() <= before
    assert await run_ends(journal, "s") == ["cut"]  # recorded as unfinished
    result = await build().resume("s")  # a new process: its own models
    assert (result.status, result.output) == ("ok", "Refund done.")
    assert await run_ends(journal, "s") == ["cut", "completed"]
    again = await build().run("refund me again", session_id="s")
    assert again.status == "ok"


@pytest.mark.anyio
@pytest.mark.parametrize("how", ["run", "stream"])
@pytest.mark.parametrize("where", ["model call", "recovery backoff"])
async def test_a_cancel_scope_stops_a_journaled_run_at_once(tmp_path: Path, how: str, where: str) -> None:
    journal = SQLiteJournal(tmp_path / "j.db")
    if where == "model call":
        model = Slow(["Refund ", "done."], delay=30.0)
        recovery = Recovery()
        reached = model.waiting
    else:  # the first call fails; the ladder waits 30 s before the retry
        model = Slow(["Refund ", "done."], fail_first=True)
        backoff = Waits()
        recovery = Recovery(retry_policy=RetryPolicy(max_attempts=3, initial_delay_s=30.0), sleep=backoff)
        reached = backoff.waiting
    agent = routed(journal, model, recovery=recovery)
    events: list[Event] = []
    before = await settled_tasks()

    async def body() -> None:
        if how == "run":
            await agent.run("refund me", session_id="s")
        else:
            async with agent.stream("refund me", session_id="s") as stream:
                async for ev in stream:
                    events.append(ev)

    with warnings_of_this_test("error"):
        # cancelled once the run waits (30 s) in the model's stream or in the backoff
        scope = await cancelled_once(reached, body)
        gc.collect()
    assert scope.cancelled_caught  # the run did not go on to finish the 30 s wait
    assert model.closed == model.calls == 1  # the model stream was closed, nothing retried
    assert pending_tasks() <= before
    assert await run_ends(journal, "s") == ["cut"]
    if how == "stream" and where == "recovery backoff":
        assert isinstance(events[-1], RecoveryRetry)
    model.delay, model.fail_first = 0.0, False
    result = await agent.resume("s")
    assert (result.status, result.output) == ("ok", "Refund done.")


# -- one session, two writers ---------------------------------------------------------------


def payments(journal: SQLiteJournal, who: str, i: int) -> tuple[Agent, ScriptedModel]:
    @tool
    async def send(amount: int) -> str:
        """Send money."""
        await anyio.lowlevel.checkpoint()
        return f"{who} sent {amount}"

    model = ScriptedModel([Call("send", {"amount": i}), f"{who}-{i}"])
    return Agent("Payments.", name="pay", model=model, tools=[send], runtime=JournalRuntime(journal)), model


@pytest.mark.anyio
async def test_two_journal_instances_on_one_file_and_session_keep_their_runs_apart(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    answers: dict[str, list[str]] = {"A": [], "B": []}

    async def writer(who: str) -> None:
        journal = SQLiteJournal(path)  # its own connection, as another process would have
        for i in range(8):
            agent, model = payments(journal, who, i)
            result = await agent.run(f"{who} pays {i}", session_id="shared")
            assert result.output == f"{who}-{i}"
            assert model.requests[1].messages[-1].parts[0].content == f"{who} sent {i}"  # type: ignore[union-attr]
            answers[who].append(result.output)
        await journal.aclose()

    async with anyio.create_task_group() as tg:
        tg.start_soon(writer, "A")
        tg.start_soon(writer, "B")
    journal = SQLiteJournal(path)
    counts = Counter(e.record.type for e in await journal.read("shared"))  # every checksum verified
    assert counts["run.start"] == counts["run.end"] == 16 and counts["model"] == 32 and counts["step"] == 16
    runs = await read_runs(journal, "shared")
    last = list(runs.first.values())[-1].prompt
    agent, model = payments(journal, last[0], int(last[-1]))
    replayed = await agent.resume("shared")
    assert model.requests == [] and replayed.output == f"{last[0]}-{last[-1]}"


def test_two_processes_on_one_journal_and_session_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "j.db"
    child = textwrap.dedent(
        """
        import sys, anyio
        from tests.test_seams_lifecycle import payments
        from jeeves_router.journal import SQLiteJournal

        async def main(who: str) -> None:
            journal = SQLiteJournal(sys.argv[1])
            for i in range(6):
                agent, model = payments(journal, who, i)
                result = await agent.run(f"{who} pays {i}", session_id="shared")
                assert result.output == f"{who}-{i}", result.output
                assert model.requests[1].messages[-1].parts[0].content == f"{who} sent {i}"

        anyio.run(main, sys.argv[2])
        """
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", child, str(path), who], cwd=ROOT, stderr=subprocess.PIPE, text=True)
        for who in ("A", "B")
    ]
    # Both finish (and close their pipes) before either is judged, so a failure of one leaves
    # no process running and no pipe open behind it.
    errs = [p.communicate(timeout=120)[1] for p in procs]
    for p, err in zip(procs, errs, strict=True):
        assert p.returncode == 0, err

    async def check() -> None:
        journal = SQLiteJournal(path)
        entries = await journal.read("shared")
        counts = Counter(e.record.type for e in entries)
        assert counts["run.start"] == counts["run.end"] == 12 and counts["tool.started"] == 12
        prompts = sorted(e.record.prompt for e in entries if e.record.type == "run.start")  # type: ignore[union-attr]
        assert prompts == sorted(f"{w} pays {i}" for w in "AB" for i in range(6))

    anyio.run(check)


# -- sticky sessions, typed context, history mode, handoffs and a failing turn ----------------


class Tier(BaseModel):
    tier: str = "free"
    invoice: str | None = None


def sticky_desk(journal: SQLiteJournal, scripts: dict[str, list[object]], classifier: StaticClassifier) -> Agent:
    @tool
    def remember(invoice: str) -> ContextUpdate:
        """Remember the invoice for the rest of the run."""
        return ContextUpdate({"invoice": invoice})

    @tool
    def whoami(ctx: ToolContext) -> str:
        """The caller's tier and invoice."""
        return f"{ctx.context.get('tier')}/{ctx.context.get('invoice')}"

    def model(name: str) -> ScriptedModel:
        return ScriptedModel(scripts.get(name, []), name=name)  # type: ignore[arg-type]

    refunds = Agent("Refunds.", name="refunds", model=model("refunds"), tools=[whoami])
    billing = Agent("Billing.", name="billing", model=model("billing"), tools=[remember], handoffs=[refunds])
    general = Agent("General.", name="general", model=model("general"))
    router = Router(
        [RouterRoute("billing", billing), RouterRoute("general", general)],
        classifier=classifier,
        sticky=True,
        context_schema=Tier,
        history="last",
        recovery=Recovery(),
    )
    return Agent("Desk", name="desk", runtime=JournalRuntime(journal), architecture=router)


@pytest.mark.anyio
async def test_sticky_typed_context_handoff_turns_with_a_failing_turn_each_resume_to_their_result(
    tmp_path: Path,
) -> None:
    journal = SQLiteJournal(tmp_path / "j.db")
    classifier = StaticClassifier("billing", rules={"weather": "general"})
    scripts: dict[str, list[object]] = {
        "billing": [Call("remember", {"invoice": "INV-1"}), Call("transfer_to_refunds", {}), "Billing here."],
        "refunds": [Call("whoami", {}), "Refunded INV-1.", ModelError("refunds down", severity="critical")],
        "general": ["Sunny."],
    }
    desk = sticky_desk(journal, scripts, classifier)
    gold = {"tier": "gold"}
    t1 = await desk.run("refund INV-1", session_id="s", context=gold)
    assert (t1.status, t1.output, t1.metadata["last_agent"]) == ("ok", "Refunded INV-1.", "refunds")
    t2 = await desk.run("and when?", session_id="s", history=t1.messages, context=gold)  # sticky: refunds fails
    assert t2.status == "critical" and len(classifier.requests) == 1
    t3 = await desk.run("and when now?", session_id="s", history=t1.messages, context=gold)  # the failure unstuck it
    assert (t3.status, t3.output, len(classifier.requests)) == ("ok", "Billing here.", 2)
    t4 = await desk.run("weather?", session_id="s", context=gold, options={"reset_sticky": True})
    assert (t4.route, t4.output, len(classifier.requests)) == ("general", "Sunny.", 3)
    turns = [t1, t2, t3, t4]
    runs = await read_runs(journal, "s")
    assert len(runs.first) == 4
    for run_id, turn in zip(runs.first, turns, strict=True):
        fresh = sticky_desk(journal, {}, StaticClassifier(None))  # a new process: no model has a reply
        replayed = await fresh.resume("s", run_id=run_id)
        assert (replayed.status, replayed.output, replayed.route) == (turn.status, turn.output, turn.route)


@pytest.mark.anyio
async def test_the_handoff_target_saw_the_typed_context_and_the_tool_update(tmp_path: Path) -> None:
    scripts: dict[str, list[object]] = {
        "billing": [Call("remember", {"invoice": "INV-1"}), Call("transfer_to_refunds", {})],
        "refunds": [Call("whoami", {}), "Refunded."],
    }
    desk = sticky_desk(SQLiteJournal(tmp_path / "j.db"), scripts, StaticClassifier("billing"))
    events: list[Event] = []
    async for ev in desk.stream("refund INV-1", session_id="s", context={"tier": "gold"}):
        events.append(ev)
    whoami = [e for e in events if e.kind == "tool.result" and e.tool == "whoami"]  # type: ignore[union-attr]
    assert [e.content for e in whoami] == ["gold/INV-1"]  # type: ignore[union-attr]
    assert isinstance(events[-1], RunCompleted) and events[-1].result.output == "Refunded."


def sender(
    path: Path, who: str, sends: list[str], gate: tuple[anyio.Event, anyio.Event] | None, policy: str = "fail"
) -> Agent:
    """A payments agent on ``path`` whose first model call sets ``gate[0]``, then waits for ``gate[1]``."""

    @tool
    async def send(amount: int) -> str:
        """Send money."""
        sends.append(who)
        return "sent"

    async def answer(request: ModelRequest) -> Reply:
        last = request.messages[-1]
        if last.role == "tool":
            return Reply(text=f"{who}: {last.parts[0].content}")  # type: ignore[union-attr]
        if gate is not None:  # a run still in flight
            gate[0].set()
            await gate[1].wait()
        return Reply(calls=[Call("send", {"amount": 5})])

    runtime = JournalRuntime(SQLiteJournal(path), on_unknown_tool_outcome=policy)  # type: ignore[arg-type]
    return Agent("Payments.", name="pay", model=FunctionModel(answer), tools=[send], runtime=runtime)


@pytest.mark.anyio
@pytest.mark.parametrize("policy", ["fail", "skip"])
async def test_resuming_a_run_still_in_flight_elsewhere_never_sends_twice(tmp_path: Path, policy: str) -> None:
    path = tmp_path / "j.db"
    sends: list[str] = []
    waiting, go = anyio.Event(), anyio.Event()
    outcome: dict[str, object] = {}

    async def in_flight() -> None:  # process A: a live run, waiting on its model
        try:
            outcome["A"] = await sender(path, "A", sends, (waiting, go), policy).run("send 5 to bob", session_id="s")
        except ToolOutcomeUnknown as exc:
            outcome["A"] = exc

    async with anyio.create_task_group() as tg:
        tg.start_soon(in_flight)
        await waiting.wait()
        resumed = await sender(path, "B", sends, None, policy).resume("s")  # process B picks A's unfinished run
        go.set()
    assert sends == ["B"]  # the first to start the call made it; the other did not repeat it
    assert resumed.output == "B: sent"
    if policy == "fail":
        assert isinstance(outcome["A"], ToolOutcomeUnknown) and "another process" in str(outcome["A"])
    else:
        assert "unknown" in outcome["A"].output  # type: ignore[union-attr]
