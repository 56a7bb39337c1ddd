"""The Capabilities architecture end to end: selection, plan_first, react, and the recovery ladder."""

from __future__ import annotations

import gc
import json
from collections import Counter
from collections.abc import Callable
from typing import Any

import anyio
import pytest

from jeeves_router import Agent
from jeeves_router.architectures.capabilities.architecture import (
    Capabilities,
    Capability,
    CapabilityCall,
    CapabilityOutput,
    ClassifierExample,
    ClassifierGuide,
)
from jeeves_router.errors import ScriptExhausted, UsageError
from jeeves_router.events import (
    CapabilitiesSelected,
    CapabilityCompleted,
    CapabilityStarted,
    Event,
    RecoveryReclassify,
    RecoveryReplan,
    RecoveryReport,
    RecoveryRetry,
    TextDelta,
)
from jeeves_router.models.base import ModelRequest, ModelTextDelta
from jeeves_router.policies import RetryPolicy
from jeeves_router.recovery import ErrorClassification, ErrorContext, ErrorSeverity, ExecutionError, Recovery
from jeeves_router.testing import Chunks, FunctionModel, RecordedSleeps, ScriptedModel, capture_events
from tests.recovery_clock import Clock
from tests.task_helpers import warnings_of_this_test


def plan(*steps: str) -> str:
    return json.dumps({"steps": [{"capability": s, "task": f"do {s}"} for s in steps]})


class Brain:
    """One scripted model for every framework call, answering by the kind of call.

    ``yes`` names the capabilities the selector accepts; ``plans`` / ``choices`` are the
    orchestrator's replies in order (the last one repeats).
    """

    def __init__(
        self,
        *,
        yes: set[str] | Callable[[str], str],
        plans: list[str] = (),
        choices: list[str] = (),
        task: str = "extracted task",
    ) -> None:  # type: ignore[assignment]
        self.yes = yes
        self.plans = list(plans)
        self.choices = list(choices)
        self.task = task
        self.calls: Counter[str] = Counter()
        self.requests: list[tuple[str, ModelRequest]] = []
        self.model = FunctionModel(self._answer, name="brain")

    def _answer(self, request: ModelRequest) -> str:
        system = request.system or ""
        if system.startswith("You decide whether"):
            name = system.split("Capability: ", 1)[1].split("\n", 1)[0]
            kind = f"select:{name}"
            self.calls[kind] += 1
            self.requests.append((kind, request))
            if callable(self.yes):
                return self.yes(name)
            return "yes" if name in self.yes else "no"
        kind = "plan" if system.startswith("You plan") else "react" if system.startswith("You complete") else "extract"
        self.calls[kind] += 1
        self.requests.append((kind, request))
        if kind == "extract":
            return self.task
        replies = self.plans if kind == "plan" else self.choices
        return replies.pop(0) if len(replies) > 1 else replies[0]

    def selections(self) -> int:
        return sum(v for k, v in self.calls.items() if k.startswith("select:"))


class Fn:
    """An async capability handler that fails with the given exceptions first, then answers."""

    def __init__(
        self, answer: str = "done", fail: list[BaseException] = (), provides: dict[str, Any] | None = None
    ) -> None:  # type: ignore[assignment]
        self.answer = answer
        self.fail = list(fail)
        self.calls: list[CapabilityCall] = []
        self.provides = provides

    async def __call__(self, call: CapabilityCall) -> str | CapabilityOutput:
        self.calls.append(call)
        if self.fail:
            raise self.fail.pop(0)
        if self.provides is not None:
            return CapabilityOutput(self.answer, context=self.provides)
        return self.answer


def agent(brain: Brain, caps: list[Capability], **kw: Any) -> Agent:
    kw.setdefault("recovery", Recovery(sleep=RecordedSleeps()))
    return Agent("Orchestrator", name="desk", model=brain.model, architecture=Capabilities(caps, **kw))


def of(events: list[Event], cls: type) -> list[Any]:
    return [e for e in events if isinstance(e, cls)]


def result(events: list[Event]) -> Any:
    return events[-1].result  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_selection_concurrency_never_exceeds_the_semaphore() -> None:
    in_flight = 0
    peak = 0

    async def selector(request: ModelRequest) -> str:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await anyio.sleep(0.01)
        in_flight -= 1
        return "yes"

    caps = [Capability(f"c{i}", Fn(f"out{i}"), f"capability {i}") for i in range(12)]
    brain = Brain(yes=set(), plans=[plan("c3")])
    arch = Capabilities(
        caps,
        classifier_model=FunctionModel(selector),
        max_concurrent_classifications=3,
        recovery=Recovery(sleep=RecordedSleeps()),
    )
    events = await capture_events(Agent("o", name="desk", model=brain.model, architecture=arch), "go")
    assert peak == 3
    [sel] = of(events, CapabilitiesSelected)
    assert sel.capabilities == tuple(f"c{i}" for i in range(12))
    assert result(events).output == "out3"


@pytest.mark.anyio
async def test_always_active_first_failing_classification_skipped() -> None:
    def yes(name: str) -> str:
        if name == "broken":
            raise ConnectionError("selector down")
        return {"sql": "Yes, it needs data.", "vague": "maybe?"}.get(name, "no")

    caps = [
        Capability("sql", Fn("rows"), "queries"),
        Capability("broken", Fn(), "flaky"),
        Capability("vague", Fn(), "unclear"),
        Capability("other", Fn(), "unrelated"),
        Capability("writer", Fn("text"), "writes", always_active=True),
    ]
    brain = Brain(yes=yes, plans=[plan("sql", "writer")])
    events = await capture_events(agent(brain, caps), "how many?")
    [sel] = of(events, CapabilitiesSelected)
    assert sel.capabilities == ("sql", "writer") and sel.always_active == ("writer",)
    assert sel.skipped == ("broken", "vague")
    assert "select:writer" not in brain.calls and brain.selections() == 4
    assert result(events).output == "text"


@pytest.mark.anyio
async def test_a_fatal_selection_failure_aborts() -> None:
    caps = [Capability("a", Fn(), "a"), Capability("b", Fn(), "b")]
    arch = Capabilities(caps, classifier_model=ScriptedModel(["yes"]), recovery=Recovery(sleep=RecordedSleeps()))
    with pytest.raises(ScriptExhausted):
        await Agent("o", name="desk", model=ScriptedModel([]), architecture=arch).run("x")


@pytest.mark.anyio
async def test_requirements_expand_transitively_unless_in_context() -> None:
    caps = [
        Capability("report", Fn("report"), "writes report", requires=("table",)),
        Capability("query", Fn("rows"), "runs sql", requires=("schema",), provides=("table",)),
        Capability("schema", Fn("cols"), "reads schema", provides=("schema",)),
        Capability("unused", Fn(), "nothing"),
    ]
    brain = Brain(yes={"report"}, plans=[plan("schema", "query", "report")])
    events = await capture_events(agent(brain, caps), "report please")
    assert of(events, CapabilitiesSelected)[0].capabilities == ("report", "query", "schema")
    assert result(events).output == "report"
    brain = Brain(yes={"report"}, plans=[plan("query", "report")])
    events = await capture_events(agent(brain, caps), "report please", context={"schema": "cols"})
    assert of(events, CapabilitiesSelected)[0].capabilities == ("report", "query")


@pytest.mark.anyio
async def test_bypass_selects_everything_without_calls() -> None:
    caps = [Capability("a", Fn("A"), "a"), Capability("b", Fn("B"), "b")]
    brain = Brain(yes=set(), plans=[plan("a", "b")])
    events = await capture_events(agent(brain, caps, bypass=True), "x")
    assert brain.selections() == 0 and of(events, CapabilitiesSelected)[0].bypass
    brain = Brain(yes=set(), plans=[plan("b")])
    events = await capture_events(agent(brain, caps), "x", options={"bypass_selection": True})
    assert brain.selections() == 0 and of(events, CapabilitiesSelected)[0].capabilities == ("a", "b")


@pytest.mark.anyio
async def test_examples_appear_in_declared_order_every_run() -> None:
    guide = ClassifierGuide(
        "Only questions about data.",
        [
            ClassifierExample("how many users?", True, "counts rows"),
            ClassifierExample("hello", False, "small talk"),
            ClassifierExample("sum of sales", True, "aggregates"),
        ],
    )
    caps = [Capability("sql", Fn("rows"), "queries", guide=guide), Capability("w", Fn(), "writes", always_active=True)]
    prompts = []
    for _ in range(2):
        brain = Brain(yes={"sql"}, plans=[plan("sql")])
        await agent(brain, caps).run("count users")
        prompts.append(next(r.system for k, r in brain.requests if k == "select:sql"))
    assert prompts[0] == prompts[1]
    text = prompts[0] or ""
    assert text.index("how many users?") < text.index("hello") < text.index("sum of sales")
    assert "Answer: yes\nReason: counts rows" in text and "Only questions about data." in text


@pytest.mark.anyio
async def test_plan_first_runs_steps_in_order_with_events_and_usage() -> None:
    writer = Agent("Writes.", name="writer", model=ScriptedModel(["Three rows."]))
    sql = Fn("rows: 3", provides={"table": "t1"})
    caps = [
        Capability("sql", sql, "queries", provides=("table", "rows")),
        Capability("writer", writer, "writes", requires=("rows",)),
    ]
    brain = Brain(yes={"sql", "writer"}, plans=[plan("sql", "writer")])
    events = await capture_events(agent(brain, caps), "how many rows?", session_id="s1")
    res = result(events)
    assert res.status == "ok" and res.output == "Three rows."
    assert [(e.capability, e.step) for e in of(events, CapabilityStarted)] == [("sql", 1), ("writer", 2)]
    assert [(e.capability, e.ok) for e in of(events, CapabilityCompleted)] == [("sql", True), ("writer", True)]
    assert all(e.duration_s >= 0 for e in of(events, CapabilityCompleted))
    assert res.metadata["plan"] == (("sql", "do sql"), ("writer", "do writer"))
    assert res.usage_by_route["writer"].requests == 1 and res.usage.requests == 4  # 2 selections, plan, writer
    writer_prompt = writer.model.requests[0].messages[-1].text  # type: ignore[union-attr]
    assert "do writer" in writer_prompt and "sql: rows: 3" in writer_prompt
    assert any(e.path == ("desk", "writer") for e in events)
    assert brain.calls["plan"] == 1 and len(sql.calls) == 1


@pytest.mark.anyio
async def test_invalid_plans_are_replanned_then_stop() -> None:
    caps = [Capability("sql", Fn(), "queries")]
    brain = Brain(yes={"sql"}, plans=[plan("nosuch")])
    events = await capture_events(agent(brain, caps), "x")
    res = result(events)
    assert res.status == "critical" and res.report["reason"] == "replans_exhausted"
    assert brain.calls["plan"] == 3
    assert [e.attempt for e in of(events, RecoveryReplan)] == [1, 2]
    brain = Brain(yes={"sql"}, plans=["not json at all", plan("sql")])
    res = await agent(brain, caps).run("x")
    assert res.status == "ok" and brain.calls["plan"] == 2
    assert "no JSON object" in brain.requests[-1][1].messages[-1].text


@pytest.mark.anyio
async def test_plan_order_is_validated_against_requires() -> None:
    caps = [
        Capability("use", Fn("used"), "uses", requires=("data",)),
        Capability("make", Fn(), "makes", provides=("data",)),
    ]
    brain = Brain(yes={"use"}, plans=[plan("use", "make"), plan("make", "use")])
    res = await agent(brain, caps).run("x")
    assert res.output == "used" and brain.calls["plan"] == 2


@pytest.mark.anyio
async def test_retriable_capability_retried_with_its_policy() -> None:
    sleeps = RecordedSleeps()
    sql = Fn("rows", fail=[TimeoutError(), TimeoutError()])
    brain = Brain(yes={"sql"}, plans=[plan("sql")])
    events = await capture_events(agent(brain, [Capability("sql", sql, "q")], recovery=Recovery(sleep=sleeps)), "x")
    assert result(events).output == "rows" and len(sql.calls) == 3 and sleeps.delays == [0.5, 0.75]
    assert [c.attempt for c in sql.calls] == [1, 2, 3]
    assert [(e.operation, e.attempt) for e in of(events, RecoveryRetry)] == [
        ("capability:sql", 2),
        ("capability:sql", 3),
    ]
    assert [e.ok for e in of(events, CapabilityCompleted)] == [False, False, True]
    sleeps = RecordedSleeps()
    sql = Fn("rows", fail=[TimeoutError()] * 5)
    cap = Capability("sql", sql, "q", retry_policy=RetryPolicy(max_attempts=2, initial_delay_s=0.1))
    assert cap.get_retry_policy().max_attempts == 2
    res = await agent(Brain(yes={"sql"}, plans=[plan("sql")]), [cap], recovery=Recovery(sleep=sleeps)).run("x")
    assert res.status == "critical" and res.report["capability"] == "sql" and len(sql.calls) == 2
    assert sleeps.delays == [0.1] and res.report["attempts"]["capability:sql"] == 2


@pytest.mark.anyio
async def test_replanning_capability_failure_asks_for_a_new_plan() -> None:
    a = Fn("A")
    b = Fn("B", fail=[ExecutionError(ErrorSeverity.REPLANNING, "no data for that range", capability_name="b")])
    c = Fn("C")
    caps = [Capability("a", a, "a"), Capability("b", b, "b"), Capability("c", c, "c")]
    brain = Brain(yes={"a", "b", "c"}, plans=[plan("a", "b"), plan("c")])
    events = await capture_events(agent(brain, caps), "x")
    res = result(events)
    assert res.status == "ok" and res.output == "C"
    assert brain.calls["plan"] == 2 and (len(a.calls), len(b.calls), len(c.calls)) == (1, 1, 1)
    second = brain.requests[-1][1].messages[-1].text
    assert "- a: A" in second and "b failed" in second
    assert res.metadata["steps"] == ("a", "c")
    assert len(of(events, RecoveryReplan)) == 1


@pytest.mark.anyio
async def test_reclassification_selects_again_without_the_failed_capability() -> None:
    def hook(exc: BaseException, ctx: ErrorContext) -> ErrorClassification | None:
        assert ctx.capability == "a"
        return ErrorClassification(ErrorSeverity.RECLASSIFICATION, "wrong tool")

    a = Fn(fail=[LookupError("x")])
    b = Fn("B")
    caps = [Capability("a", a, "a", classify_error=hook), Capability("b", b, "b")]
    brain = Brain(yes={"a", "b"}, plans=[plan("a"), plan("b")])
    events = await capture_events(agent(brain, caps), "x")
    res = result(events)
    assert res.status == "ok" and res.output == "B"
    assert brain.calls["select:a"] == 1 and brain.calls["select:b"] == 2 and brain.calls["plan"] == 2
    [re] = of(events, RecoveryReclassify)
    assert re.excluded == ("a",)
    assert [e.capabilities for e in of(events, CapabilitiesSelected)] == [("a", "b"), ("b",)]
    assert "wrong tool" in brain.requests[-2][1].messages[-1].text  # the second selection of b


@pytest.mark.anyio
async def test_critical_and_fatal_capability_failures() -> None:
    sql = Fn(fail=[ValueError("bad input")])
    events = await capture_events(agent(Brain(yes={"sql"}, plans=[plan("sql")]), [Capability("sql", sql, "q")]), "x")
    res = result(events)
    assert res.status == "critical" and len(sql.calls) == 1 and res.report["capability"] == "sql"
    assert len(of(events, RecoveryReport)) == 1
    sql = Fn(fail=[ExecutionError("fatal", "stop everything")])
    with pytest.raises(ExecutionError, match="stop everything"):
        await agent(Brain(yes={"sql"}, plans=[plan("sql")]), [Capability("sql", sql, "q")]).run("x")
    assert len(sql.calls) == 1


@pytest.mark.anyio
async def test_react_goes_back_to_the_orchestrator_after_each_step() -> None:
    a, b = Fn("A"), Fn("B")
    choices = [
        json.dumps({"capability": "a", "task": "first"}),
        json.dumps({"capability": "nope"}),
        json.dumps({"capability": "b", "task": "second"}),
        json.dumps({"answer": "All done."}),
    ]
    brain = Brain(yes={"a", "b"}, choices=choices)
    events = await capture_events(agent(brain, [Capability("a", a, "a"), Capability("b", b, "b")], mode="react"), "x")
    res = result(events)
    assert res.status == "ok" and res.output == "All done."
    assert brain.calls["react"] == 4 and len(a.calls) == 1 and len(b.calls) == 1
    assert len(of(events, RecoveryReplan)) == 1
    assert "- a: A" in brain.requests[-1][1].messages[-1].text


@pytest.mark.anyio
async def test_react_is_bounded_by_max_iterations() -> None:
    a = Fn("A")
    brain = Brain(yes={"a"}, choices=[json.dumps({"capability": "a", "task": "again"})])
    res = await agent(brain, [Capability("a", a, "a", repeatable=True)], mode="react", max_iterations=3).run("x")
    assert res.status == "max_turns" and len(a.calls) == 3 and brain.calls["react"] == 3


@pytest.mark.anyio
async def test_a_react_repeat_of_a_completed_function_call_is_answered_by_it() -> None:
    # not repeatable: its call may have had effects (a refund), so the same task is never called twice
    a = Fn("A")
    brain = Brain(yes={"a"}, choices=[json.dumps({"capability": "a", "task": "again"})])
    res = await agent(brain, [Capability("a", a, "a")], mode="react", max_iterations=3).run("x")
    assert res.status == "max_turns" and len(a.calls) == 1 and brain.calls["react"] == 3


@pytest.mark.anyio
async def test_task_extraction_feeds_selection_and_planning() -> None:
    from jeeves_router.messages import assistant, user

    a = Fn("A")
    brain = Brain(yes={"a"}, plans=[plan("a")], task="Sales report for last month")
    history = [user("Sales report for this month"), assistant("Here it is.")]
    await agent(brain, [Capability("a", a, "a")], task_extraction=True).run("and for last month?", history=history)
    kinds = [k for k, _ in brain.requests]
    assert kinds[0] == "extract" and brain.calls["extract"] == 1
    assert "Sales report for this month" in brain.requests[0][1].messages[0].text
    assert brain.requests[1][1].messages[0].text == "Task: Sales report for last month"
    assert a.calls[0].objective == "Sales report for last month"


@pytest.mark.anyio
async def test_nothing_selected_stops_with_a_report() -> None:
    res = await agent(Brain(yes=set(), plans=[plan("a")]), [Capability("a", Fn(), "a")]).run("x")
    assert res.status == "critical" and res.report["operation"] == "select"


def test_capability_and_architecture_validation() -> None:
    def sync_handler(call: CapabilityCall) -> str:
        return "x"

    with pytest.raises(UsageError, match="async function"):
        Capability("a", sync_handler, "a")
    with pytest.raises(UsageError, match="capability name"):
        Capability("bad name", Fn(), "a")
    with pytest.raises(UsageError, match="requires"):
        Capability("a", Fn(), "a", requires="table")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="duplicate"):
        Capabilities([Capability("a", Fn()), Capability("a", Fn())])
    with pytest.raises(UsageError, match="max_concurrent"):
        Capabilities([Capability("a", Fn())], max_concurrent_classifications=0)
    with pytest.raises(UsageError, match="mode"):
        Capabilities([Capability("a", Fn())], mode="graph")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="no model"):
        Agent("o", name="o", architecture=Capabilities([Capability("a", Fn())]))


@pytest.mark.anyio
async def test_wall_clock_limit_ends_a_slow_step(clock: Clock) -> None:
    calls = 0

    async def slow(call: CapabilityCall) -> str:
        nonlocal calls
        calls += 1
        clock.release()  # the run's time passes from here (however long the way here took)
        await anyio.sleep(30)
        return "late"

    brain = Brain(yes={"slow"}, plans=[plan("slow")])
    # The run's time starts passing in the step (the way there is not counted), and the step's
    # time box waits a real second: time for the step to start inside it on a loaded machine.
    clock.hold()
    res = await agent(brain, [Capability("slow", slow, "slow")], recovery=Recovery(time_limit_s=1.0)).run("x")
    assert res.status == "critical" and res.report["reason"] == "time_limit" and calls == 1
    assert res.report["error"]["type"] == "TimeoutError"


@pytest.mark.anyio
async def test_cancelling_during_a_capability_backoff_returns_at_once() -> None:
    sql = Fn("rows", fail=[TimeoutError()])
    brain = Brain(yes={"sql"}, plans=[plan("sql")])
    with anyio.CancelScope() as scope:

        async def backoff(delay: float) -> None:
            scope.cancel()  # the backoff is reached: cancel the run while it waits (30 s)
            await anyio.sleep(delay)

        recovery = Recovery(retry_policy=RetryPolicy(max_attempts=3, initial_delay_s=30.0), sleep=backoff)
        await agent(brain, [Capability("sql", sql, "q")], recovery=recovery).run("x")
    assert scope.cancelled_caught and len(sql.calls) == 1


@pytest.mark.anyio
async def test_a_journaled_capability_run_replays_without_calls() -> None:
    from jeeves_router.journal import JournalRuntime, MemoryJournal

    journal = MemoryJournal()
    sql = Fn("rows: 3", provides={"table": "t1"})
    caps = [Capability("sql", sql, "queries", provides=("table",)), Capability("other", Fn(), "unrelated")]
    brain = Brain(yes={"sql"}, plans=[plan("sql")])
    live = Agent(
        "o",
        name="desk",
        model=brain.model,
        runtime=JournalRuntime(journal),
        architecture=Capabilities(caps, recovery=Recovery(sleep=RecordedSleeps())),
    )
    first = await live.run("how many rows?", session_id="cap-1")
    silent = ScriptedModel([], name="silent")
    replay = Agent(
        "o",
        name="desk",
        model=silent,
        runtime=JournalRuntime(journal),
        architecture=Capabilities(caps, recovery=Recovery(sleep=RecordedSleeps())),
    )
    again = await replay.resume("cap-1")
    assert again.output == first.output == "rows: 3"
    assert silent.requests == [] and len(sql.calls) == 1


class StreamsThenFails:
    """A model that streams one chunk of text, then fails with a retriable error."""

    name = "streams-then-fails"

    def __init__(self) -> None:
        self.calls = 0

    async def request(self, request: ModelRequest) -> Any:  # pragma: no cover - the tool loop streams
        raise AssertionError("not used")

    async def stream(self, request: ModelRequest) -> Any:
        self.calls += 1
        yield ModelTextDelta("partial answer")
        raise ConnectionError("connection reset mid-stream")


@pytest.mark.anyio
async def test_an_agent_step_whose_text_reached_the_consumer_is_not_retried() -> None:
    model = StreamsThenFails()
    writer = Agent("Writes.", name="writer", model=model)
    brain = Brain(yes={"writer"}, plans=[plan("writer")])
    events = await capture_events(agent(brain, [Capability("writer", writer, "writes")]), "x")
    assert model.calls == 1  # its text was streamed: a retry would show the user a second answer
    assert not of(events, RecoveryRetry)
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["partial answer"]
    assert result(events).status == "critical"


@pytest.mark.anyio
async def test_closing_the_stream_mid_step_stops_the_capability_agent_cleanly() -> None:
    writer = Agent("Writes.", name="writer", model=ScriptedModel([Chunks(*[f"w{i} " for i in range(50)])]))
    brain = Brain(yes={"writer"}, plans=[plan("writer")])
    desk = agent(brain, [Capability("writer", writer, "writes")])
    with warnings_of_this_test("error"):
        stream = desk.stream("x")
        seen = 0
        async for ev in stream:
            if isinstance(ev, TextDelta):
                seen += 1
                if seen == 3:
                    break
        await stream.aclose()
        gc.collect()
    assert seen == 3 and stream.result is None
