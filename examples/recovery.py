"""Each recovery severity, end to end, on scripted models (no API key, no network).

Run: ``python examples/recovery.py``

1. RETRIABLE         — a specialist times out once; the router dispatches it again.
2. RECLASSIFICATION  — a specialist says "not mine"; the router classifies again without it.
3. REPLANNING        — a capability finds no data; the orchestrator makes a new plan.
4. CRITICAL          — a specialist gets bad input; the run stops with a report.
5. FATAL             — credentials are revoked; the run aborts with the original exception.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio

from jeeves_router import Agent, Router, RouterRoute
from jeeves_router.architectures.capabilities.architecture import Capabilities, Capability, CapabilityCall
from jeeves_router.events import (
    CapabilityStarted,
    Event,
    RecoveryReclassify,
    RecoveryReplan,
    RecoveryReport,
    RecoveryRetry,
    RouterDispatched,
)
from jeeves_router.models.base import ModelRequest
from jeeves_router.policies import RetryPolicy
from jeeves_router.recovery import ErrorClassification, ErrorContext, ErrorSeverity, ExecutionError, Recovery
from jeeves_router.testing import FunctionModel, ScriptedModel, capture_events

FAST = Recovery(retry_policy=RetryPolicy(max_attempts=3, initial_delay_s=0.05), framework_retry=RetryPolicy(2, 0.01))
BILLING = "route: billing\nconfidence: 0.9"


def desk(billing_model: ScriptedModel, general_model: ScriptedModel | None = None, **route_kw: Any) -> Agent:
    """A two-route desk whose classifier picks billing first and general second."""
    billing = Agent("You resolve payments.", name="billing", model=billing_model)
    general = Agent("You answer everything else.", name="general", model=general_model or ScriptedModel([]))
    routes = [RouterRoute("billing", billing, "payments", **route_kw), RouterRoute("general", general, "else")]
    classifier = ScriptedModel([BILLING, "route: general\nconfidence: 0.8"])
    return Agent("Support desk", name="desk", model=classifier, architecture=Router(routes, recovery=FAST))


def show(title: str, events: list[Event]) -> None:
    print(f"\n== {title}")
    for ev in events:
        match ev:
            case RouterDispatched(route=route):
                print(f"  dispatched to {route}")
            case RecoveryRetry(operation=op, attempt=n, delay_s=d, severity=s):
                print(f"  retry {op} (attempt {n}) after {d:.2f}s [{s}]")
            case RecoveryReclassify(excluded=ex):
                print(f"  reclassify without {', '.join(ex)}")
            case RecoveryReplan(attempt=n, error=err):
                print(f"  replan #{n} after {err}")
            case CapabilityStarted(capability=c, step=i):
                print(f"  step {i}: {c}")
            case RecoveryReport(severity=s, user_message=msg):
                print(f"  report [{s}]: {msg}")
    result = events[-1].result  # type: ignore[union-attr]
    print(f"  -> status={result.status} output={result.output!r}")


async def main() -> None:
    # 1. RETRIABLE: a timeout is retried with backoff.
    show("RETRIABLE", await capture_events(desk(ScriptedModel([TimeoutError("slow"), "Refund issued."])), "refund?"))

    # 2. RECLASSIFICATION: the route's hook says the request belongs elsewhere.
    def not_billing(exc: BaseException, ctx: ErrorContext) -> ErrorClassification | None:
        if isinstance(exc, LookupError):
            return ErrorClassification(ErrorSeverity.RECLASSIFICATION, "This is not a billing question.")
        return None

    agent = desk(
        ScriptedModel([LookupError("no invoice")]),
        ScriptedModel(["Opening hours are 9-5."]),
        classify_error=not_billing,
    )
    show("RECLASSIFICATION", await capture_events(agent, "when are you open?"))

    # 3. REPLANNING: a capability finds nothing; the orchestrator plans around it.
    async def sales(call: CapabilityCall) -> str:
        raise ExecutionError(ErrorSeverity.REPLANNING, "no sales data for that range", capability_name="sales")

    async def archive(call: CapabilityCall) -> str:
        return "Archived sales: 120 units."

    plans = [["sales"], ["archive"]]

    def orchestrator(request: ModelRequest) -> str:
        if (request.system or "").startswith("You decide whether"):
            return "yes"
        return json.dumps({"steps": [{"capability": c, "task": "sales last month"} for c in plans.pop(0)]})

    caps = [Capability("sales", sales, "live sales database"), Capability("archive", archive, "sales archive")]
    planner = Agent(
        "Analyst", name="analyst", model=FunctionModel(orchestrator), architecture=Capabilities(caps, recovery=FAST)
    )
    show("REPLANNING", await capture_events(planner, "sales last month?"))

    # 4. CRITICAL: bad input is not retried; the user gets a safe message, developers a report.
    result = await desk(ScriptedModel([ValueError("invoice id 'x' is malformed")])).run("refund x")
    report = result.report or {}
    print(f"\n== CRITICAL\n  -> status={result.status}\n  user: {report['user_message']}")
    print(f"  report: {json.dumps({k: report[k] for k in ('severity', 'operation', 'attempts', 'error')})}")

    # 5. FATAL: abort at once, with the original exception.
    try:
        await desk(ScriptedModel([ExecutionError(ErrorSeverity.FATAL, "API key revoked")])).run("refund?")
    except ExecutionError as exc:
        print(f"\n== FATAL\n  raised {type(exc).__name__}: {exc} (severity {exc.severity})")


if __name__ == "__main__":
    # the failures are the point of this demo: show only errors of the library
    logging.basicConfig(level=logging.ERROR, format="%(levelname)s %(name)s: %(message)s")  # stderr
    anyio.run(main)
