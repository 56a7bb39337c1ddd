"""A retried specialist's completed calls are answered from the ledger whatever its retry does first.

The ledger learns that a session was rewound (a framework retry runs it again from an
earlier step) from the first step of the retry that takes a key at or before a completed
call's. A retried model whose first turns call no tool that takes a key (a tool that does
not exist, arguments that are not JSON) reaches the refund at a step after every step the
abandoned attempt used: the rewind must still be seen, or the refund is paid twice.
"""

from __future__ import annotations

import json

import pytest

from jeeves_router import Agent, Router, RouterRoute, tool
from jeeves_router.architectures.capabilities.architecture import Capabilities, Capability
from jeeves_router.models.base import ModelRequest
from jeeves_router.recovery import Recovery
from jeeves_router.testing import Call, FunctionModel, RecordedSleeps, Reply, StaticClassifier


def retried_clerk(refunds: list[str], detour: str) -> Agent:
    """Attempt 1 refunds, then its model call times out; attempt 2 calls ``detour`` first, then refunds.

    ``lookup`` is one of the clerk's tools (the retry reaches the refund at another step);
    ``find_invoice`` is not (an error result that takes no step key).
    """

    @tool
    def refund(invoice: str) -> str:
        """Refund an invoice."""
        refunds.append(invoice)
        return f"refunded {invoice}"

    @tool
    def lookup(invoice: str) -> str:
        """Look an invoice up."""
        return f"{invoice}: paid twice"

    attempts: list[int] = []

    def turn(request: ModelRequest) -> Reply:
        done = [p.name for m in request.messages if m.role == "tool" for p in m.parts]  # type: ignore[union-attr]
        if not done:
            attempts.append(1)
        if len(attempts) == 1:
            if not done:
                return Reply(calls=[Call("refund", {"invoice": "INV-7"})])
            raise TimeoutError("read timed out")
        if not done:
            return Reply(calls=[Call(detour, {"invoice": "INV-7"})])
        if done == [detour]:
            return Reply(calls=[Call("refund", {"invoice": "INV-7"})])
        return Reply(text="Refunded INV-7.")

    return Agent("Billing.", name="billing", model=FunctionModel(turn, name="billing"), tools=[refund, lookup])


DETOURS = pytest.mark.parametrize("detour", ["lookup", "find_invoice"], ids=["another-path", "unknown-tool"])


@pytest.mark.anyio
@DETOURS
async def test_a_router_retry_that_takes_a_detour_refunds_once(detour: str) -> None:
    refunds: list[str] = []
    routes = [RouterRoute("billing", retried_clerk(refunds, detour), "payments")]
    router = Router(routes, classifier=StaticClassifier("billing"), recovery=Recovery(sleep=RecordedSleeps()))
    result = await Agent("Desk.", name="desk", architecture=router).run("refund INV-7")
    assert (result.status, result.output) == ("ok", "Refunded INV-7.")
    assert refunds == ["INV-7"]  # the retry's refund, after its detour, is the first attempt's


@pytest.mark.anyio
@DETOURS
async def test_a_capability_retry_that_takes_a_detour_refunds_once(detour: str) -> None:
    refunds: list[str] = []
    plan = json.dumps({"steps": [{"capability": "billing", "task": "refund INV-7"}]})

    def orchestrator(request: ModelRequest) -> Reply:
        return Reply(text="yes" if "Capability:" in (request.system or "") else plan)

    caps = Capabilities([Capability("billing", retried_clerk(refunds, detour), "refunds")])
    agent = Agent("Accounts.", name="accounts", model=FunctionModel(orchestrator, name="o"), architecture=caps)
    result = await agent.run("refund INV-7")
    assert (result.status, result.output) == ("ok", "Refunded INV-7.")
    assert refunds == ["INV-7"]
