"""A recovered or forked DBOS workflow decides on a checkpointed failure as the run decided.

The failed step is checkpointed before any recovery ladder judges it; its judgement (a
``classify_error`` hook's answer, whether the run's time limit was spent) follows as a
``<name>.judged`` step. A fork from past the end of a workflow replays every step from its
checkpoints, as a recovered workflow replays the steps its dead worker completed; a fork from
the ``.judged`` step is the state a worker killed between the failure and its judgement leaves.
SQLite system database, one process: no server needed.
"""

from __future__ import annotations

from typing import Any

import pytest

from jeeves_router import Agent, tool
from jeeves_router.architectures.react import ToolLoop
from jeeves_router.recovery import ErrorClassification, ErrorSeverity, Recovery
from jeeves_router.recovery.classify import ErrorContext
from jeeves_router.testing import Call, FunctionModel, RecordedSleeps, Reply, ScriptedModel
from tests.recovery_clock import Clock


class RefundDeclined(Exception):
    """An error type of the application's own (a replay raises a stand-in named after it)."""


class FlakyHook:
    """A ``classify_error`` hook whose answer changes (as a counter, the time or a model asked to judge may)."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def __call__(self, exc: BaseException, ctx: ErrorContext) -> ErrorClassification:
        self.asked.append(type(exc).__name__)
        if len(self.asked) == 1:
            return ErrorClassification(ErrorSeverity.RETRIABLE, "the bank asks to try again")
        return ErrorClassification(ErrorSeverity.CRITICAL, "the refund was declined")


async def launch(agent: Agent, workflow_name: str, url: str) -> Any:
    from dbos import DBOS

    from jeeves_router.durable.dbos import DurableAgents, dbos_config

    durable = DurableAgents([agent], workflow_name=workflow_name)
    DBOS(config=dbos_config("jeeves-sqlite-test", url, executor_id="solo"))
    DBOS.launch()
    await durable.register_queue(polling_interval_sec=0.1)
    return durable


async def step_names(workflow_id: str) -> list[str]:
    from dbos import DBOS

    return [s["function_name"] for s in await DBOS.list_workflow_steps_async(workflow_id)]


async def replay(durable: Any, workflow_id: str) -> Any:
    """Fork ``workflow_id`` from past its last step (every step from its checkpoint): the fork's id and result.

    Past its last step id: a call the time box cut off left no checkpoint, so the ids may have a gap.
    """
    from dbos import DBOS

    last = max((s["function_id"] for s in await DBOS.list_workflow_steps_async(workflow_id)), default=0)
    forked = await DBOS.fork_workflow_async(workflow_id, last + 1)
    return forked.workflow_id, await durable.result(forked.workflow_id)


def decided(report: dict[str, Any] | None) -> tuple[Any, ...]:
    """What a report says was decided (not how long the steps took)."""
    assert report is not None
    return report["severity"], report["reason"], report["user_message"]


async def invoice_run(dbos_app: str, clock: Clock, workflow_name: str, *, slow: bool) -> tuple[Any, str, Any, Any]:
    """A billing run under a 30 s limit that looks INV-7 up, then answers: durable, workflow id, result, model.

    ``slow``: the lookup takes 60 s of the run's time, so the limit ends the run before its answer.
    """

    @tool
    def lookup(invoice: str) -> str:
        """Look an invoice up."""
        if slow:
            clock.skipped += 60.0
        return f"{invoice}: paid"

    model = ScriptedModel([Reply(calls=[Call("lookup", {"invoice": "INV-7"})]), "Paid."])
    agent = billing(model, Recovery(time_limit_s=30.0, sleep=RecordedSleeps()), [lookup])
    durable = await launch(agent, workflow_name, dbos_app)
    wid = await durable.enqueue("is INV-7 paid?", session_id="q1", workflow_id="wf-1")
    return durable, wid, await durable.result(wid), model


def reselecting_desk(capabilities: list[Any]) -> tuple[Agent, Any]:
    """A Capabilities desk on DBOS selecting ``a`` and ``b``, planning ``a`` then (reselected) ``b``; and its brain."""
    from jeeves_router.architectures.capabilities.architecture import Capabilities
    from jeeves_router.durable.dbos import DBOSRuntime
    from tests.test_capabilities import Brain, plan

    brain = Brain(yes={"a", "b"}, plans=[plan("a"), plan("b")])
    desk = Agent(
        "Orchestrator",
        name="desk",
        model=brain.model,
        runtime=DBOSRuntime(),
        architecture=Capabilities(capabilities, recovery=Recovery(sleep=RecordedSleeps())),
    )
    return desk, brain


def billing(model: Any, recovery: Recovery, tools: list[Any] | None = None) -> Agent:
    from jeeves_router.durable.dbos import DBOSRuntime

    return Agent(
        "Billing.",
        name="billing",
        model=model,
        tools=tools or [],
        architecture=ToolLoop(recovery=recovery),
        runtime=DBOSRuntime(),
    )


@pytest.mark.anyio
async def test_a_replayed_failure_takes_the_hooks_recorded_answer_not_a_new_one(dbos_app: str) -> None:
    hook, sleeps = FlakyHook(), RecordedSleeps()
    model = ScriptedModel([RefundDeclined("try again later"), "Refund issued."])
    durable = await launch(
        billing(model, Recovery(classify_error=hook, sleep=sleeps)), "jeeves_test.judged_hook", dbos_app
    )
    wid = await durable.enqueue("refund INV-7", session_id="q1", workflow_id="wf-1")
    run = await durable.result(wid)
    assert (run.status, run.output, hook.asked, len(sleeps.delays)) == ("ok", "Refund issued.", ["RefundDeclined"], 1)

    _, replayed = await replay(durable, wid)
    assert (replayed.status, replayed.output) == ("ok", "Refund issued.")  # retried, as the run did
    assert hook.asked == ["RefundDeclined"]  # not asked again (it would say critical now)
    assert len(model.requests) == 2 and len(sleeps.delays) == 1  # no model call, no backoff again
    assert await step_names(wid) == ["model", "model.judged", "model"]  # the judgement follows its failure


@pytest.mark.anyio
async def test_a_failure_whose_judgement_was_never_checkpointed_is_judged_again_then_kept(dbos_app: str) -> None:
    """A worker killed between a failure and its judgement: the recovered run judges it, and that judgement stays."""
    from dbos import DBOS

    hook, sleeps = FlakyHook(), RecordedSleeps()
    model = ScriptedModel([RefundDeclined("try again later"), "Refund issued."])
    durable = await launch(
        billing(model, Recovery(classify_error=hook, sleep=sleeps)), "jeeves_test.judged_lost", dbos_app
    )
    wid = await durable.enqueue("refund INV-7", session_id="q1", workflow_id="wf-1")
    assert (await durable.result(wid)).status == "ok"
    steps = await DBOS.list_workflow_steps_async(wid)
    judged = next(s["function_id"] for s in steps if s["function_name"] == "model.judged")
    lost = await DBOS.fork_workflow_async(wid, judged)  # the failure's checkpoint without its judgement
    recovered = await durable.result(lost.workflow_id)
    assert recovered.status == "critical" and hook.asked == ["RefundDeclined"] * 2  # judged now: the hook's new answer
    assert await step_names(lost.workflow_id) == ["model", "model.judged", "model.judged"]  # "not judged", then it

    _, again = await replay(durable, lost.workflow_id)
    assert again.status == "critical" and decided(again.report) == decided(recovered.report)
    assert hook.asked == ["RefundDeclined"] * 2 and len(model.requests) == 2  # decided from the checkpoints


@pytest.mark.anyio
async def test_a_replayed_failure_judged_past_the_time_limit_stops_again(dbos_app: str, clock: Clock) -> None:
    """The replay's clock is not the run's: the run's limit was spent when it judged the failure, so it stops."""

    def answer(request: Any) -> Reply:
        clock.skipped += 60.0  # the failed call took the run past its limit: no retry
        raise TimeoutError("read timed out")

    model = FunctionModel(answer, name="billing")
    agent = billing(model, Recovery(time_limit_s=30.0, sleep=RecordedSleeps()))
    durable = await launch(agent, "jeeves_test.judged_limit", dbos_app)
    wid = await durable.enqueue("refund INV-7", session_id="q1", workflow_id="wf-1")
    run = await durable.result(wid)
    assert run.status == "critical" and run.report is not None and run.report["reason"] == "time_limit"
    assert len(model.requests) == 1

    clock.skipped = 0.0  # the replay is quick: its own clock would allow a retry
    _, replayed = await replay(durable, wid)
    assert replayed.status == "critical" and replayed.report is not None
    assert replayed.report["reason"] == "time_limit"
    assert len(model.requests) == 1  # no retry: the recorded decision was a stop


@pytest.mark.anyio
async def test_a_recovered_workflow_measures_its_time_limit_from_its_own_start(dbos_app: str, clock: Clock) -> None:
    """The limit is the execution's, not the workflow's: a worker's downtime is not the run's time.

    The run's time ran out before its second model call, which it never made. A worker that died
    before that stop was checkpointed (a fork from its ``.limit`` step) leaves a later execution
    that replays the checkpointed steps and makes that call within its own limit, as a journal's
    resume of an unfinished run does (a stop that was checkpointed is replayed: test_dbos_limits).
    A deadline across executions is DBOS's workflow timeout, which DBOS keeps in its database.
    """
    durable, wid, run, model = await invoice_run(dbos_app, clock, "jeeves_test.limit_clock", slow=True)
    assert run.status == "critical" and run.report is not None and run.report["reason"] == "time_limit"
    assert len(model.requests) == 1

    from dbos import DBOS

    clock.skipped = 0.0
    steps = await DBOS.list_workflow_steps_async(wid)
    stop = next(s["function_id"] for s in steps if s["function_name"] == "limit:model.limit")
    lost = await DBOS.fork_workflow_async(wid, stop)  # the steps before the stop, not its checkpoint
    later = await durable.result(lost.workflow_id)
    assert (later.status, later.output) == ("ok", "Paid.")
    assert len(model.requests) == 2  # the tool's checkpoint is replayed, the call it never made is made


@pytest.mark.anyio
async def test_a_judgement_checkpointed_before_parallel_steps_keeps_their_order_on_replay(dbos_app: str) -> None:
    """After a failed capability, the reselection asks its capabilities in parallel: the judgement comes first."""
    from jeeves_router.architectures.capabilities.architecture import Capability, CapabilityCall

    def wrong_tool(exc: BaseException, ctx: ErrorContext) -> ErrorClassification:
        return ErrorClassification(ErrorSeverity.RECLASSIFICATION, "wrong tool")

    calls: list[str] = []

    def handler(name: str, fail: bool = False) -> Any:
        async def run(call: CapabilityCall) -> str:
            calls.append(name)
            if fail:
                raise LookupError("no such invoice table")
            return name.upper()

        return run

    caps = [
        Capability("a", handler("a", fail=True), "a", classify_error=wrong_tool),
        Capability("b", handler("b"), "b"),
        Capability("c", handler("c"), "c"),
    ]
    desk, brain = reselecting_desk(caps)
    durable = await launch(desk, "jeeves_test.judged_parallel", dbos_app)
    wid = await durable.enqueue("refund INV-7", session_id="q1", workflow_id="wf-1")
    run = await durable.result(wid)
    assert (run.status, run.output, calls) == ("ok", "B", ["a", "b"])
    names = await step_names(wid)
    failed = names.index("capability:a")
    assert names[failed + 1] == "capability:a.judged"  # drawn before the reselection's parallel steps
    assert sorted(names[failed + 2 : failed + 4]) == ["select:b", "select:c"]

    asked = len(brain.requests)
    _, replayed = await replay(durable, wid)
    assert (replayed.status, replayed.output) == ("ok", "B")
    assert len(brain.requests) == asked and calls == ["a", "b"]  # every step from its checkpoint
