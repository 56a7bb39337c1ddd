"""Every event real runs send reads back from JSON equal to the event sent.

Through ``event_adapter()`` (a journal, a served ``/v1/runs`` stream, ``jeeves-router replay``):
a ``run.completed`` result's metadata tuples (a chain's ``handoffs`` and ``agents``, a
Router's ``excluded_routes``, a Capabilities run's ``capabilities``, ``plan`` and ``steps``)
came back as lists, so the result read back was not equal to the one the run returned.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

import pytest

from jeeves_router import (
    Agent,
    Capabilities,
    Capability,
    CapabilityCall,
    ErrorClassification,
    ErrorContext,
    ErrorSeverity,
    Recovery,
    Router,
    RouterRoute,
)
from jeeves_router.events import Event, RunCompleted, event_adapter
from jeeves_router.models.base import ModelRequest
from jeeves_router.testing import Call, FunctionModel, RecordedSleeps, ScriptedModel, capture_events

pytestmark = pytest.mark.anyio


async def chain() -> list[Event]:
    billing = Agent("b", name="billing", model=ScriptedModel(["Refunded."]))
    technical = Agent("t", name="technical", model=ScriptedModel([]))
    turn = [Call("transfer_to_billing", {"reason": "refund"}), Call("transfer_to_technical", {})]
    triage = Agent("tr", name="triage", model=ScriptedModel([turn]), handoffs=[billing, technical])
    return await capture_events(triage, "charged twice")


async def reclassified() -> list[Event]:
    def hook(exc: BaseException, ctx: ErrorContext) -> ErrorClassification:
        return ErrorClassification(ErrorSeverity.RECLASSIFICATION, "not a billing question")

    billing = Agent("b", name="billing", model=ScriptedModel([RuntimeError("wrong desk")]))
    general = Agent("g", name="general", model=ScriptedModel(["Here you go."]))
    router = Router(
        [RouterRoute("billing", billing, "payments", classify_error=hook), RouterRoute("general", general, "rest")],
        recovery=Recovery(sleep=RecordedSleeps()),
    )
    clf = ScriptedModel(["route: billing\nconfidence: 0.9", "route: general\nconfidence: 0.8"])
    return await capture_events(Agent("Desk.", name="desk", model=clf, architecture=router), "x")


async def capabilities() -> list[Event]:
    def brain(request: ModelRequest) -> str:
        system = request.system or ""
        if system.startswith("You decide whether"):
            return "yes"
        if system.startswith("You plan"):
            return json.dumps({"steps": [{"capability": c, "task": f"do {c}"} for c in ("sql", "writer")]})
        return "the task"

    async def sql(call: CapabilityCall) -> str:
        return "rows: 3"

    writer = Agent("Writes.", name="writer", model=ScriptedModel(["Three rows."]))
    caps = [Capability("sql", sql, "queries"), Capability("writer", writer, "writes")]
    arch = Capabilities(caps, recovery=Recovery(sleep=RecordedSleeps()))
    return await capture_events(Agent("O", name="desk", model=FunctionModel(brain), architecture=arch), "rows?")


async def max_turns() -> list[Event]:
    looping = Agent("l", name="loop", model=ScriptedModel([Call("transfer_to_nowhere", {})]), max_turns=1)
    return await capture_events(looping, "x")


RUNS: dict[str, Callable[[], Awaitable[list[Event]]]] = {
    "chain": chain,
    "reclassified": reclassified,
    "capabilities": capabilities,
    "max_turns": max_turns,
}
TUPLES = {
    "chain": ("handoffs", "agents"),
    "reclassified": ("excluded_routes",),
    "capabilities": ("capabilities", "plan", "steps"),
    "max_turns": (),
}


@pytest.mark.parametrize("run", RUNS)
async def test_every_event_of_a_run_reads_back_equal(run: str) -> None:
    events = await RUNS[run]()
    adapter = event_adapter()
    for event in events:
        assert adapter.validate_json(adapter.dump_json(event)) == event, event.kind
    result = events[-1]
    assert isinstance(result, RunCompleted)
    assert all(isinstance(result.result.metadata[k], tuple) for k in TUPLES[run])  # what the run wrote
