"""Seams of the trace page: each decision of nested routers is shown with its own classification.

``load_trace`` pairs every ``router.classified`` event with the classify step recorded in
that router's session (for the routes' scores and the call's usage). A Router inside a
Router classifies in its own (child) session: its decisions must be counted in that session,
not among every router's decisions of the run, or a router that classified again (recovery)
showed its first decision with its second classification's scores and usage.
"""

from __future__ import annotations

import pytest

from jeeves_router import Agent, ErrorClassification, ErrorSeverity, Recovery, Router, RouterRoute
from jeeves_router.journal import JournalRuntime, MemoryJournal
from jeeves_router.journal.trace_data import load_trace
from jeeves_router.models.base import ModelRequest
from jeeves_router.testing import FunctionModel, RecordedSleeps, Reply
from jeeves_router.usage import Usage


class NotMine(Exception):
    """A specialist saying the request is not for it."""


def not_mine(exc: BaseException, context: object) -> ErrorClassification | None:
    return ErrorClassification(ErrorSeverity.RECLASSIFICATION, "Not a refund.") if isinstance(exc, NotMine) else None


def refuses(request: ModelRequest) -> str:
    raise NotMine("not mine")


def classifier(*replies: tuple[str, int]) -> FunctionModel:
    """Answers ``replies`` in turn, each ``(route, input tokens)`` (the tokens tell the calls apart)."""
    left = list(replies)

    def answer(request: ModelRequest) -> Reply:
        route, tokens = left.pop(0)
        return Reply(f"route: {route}\nconfidence: 0.9", usage=Usage(input_tokens=tokens, output_tokens=1, requests=1))

    return FunctionModel(answer, name="classifier")


def nested_desk() -> Agent:
    """desk -> billing (a Router: refunds refuses and is reclassified, invoices answers) or general."""
    refunds = Agent("Refunds.", name="refunds", model=FunctionModel(refuses, name="refunds"))
    invoices = Agent("Invoices.", name="invoices", model=FunctionModel(lambda r: "invoice sent", name="invoices"))
    billing = Agent(
        "Billing desk.",
        name="billing",
        model=classifier(("refunds", 21), ("invoices", 22)),
        architecture=Router(
            routes=[
                RouterRoute("refunds", refunds, "refunds", classify_error=not_mine),
                RouterRoute("invoices", invoices, "invoices"),
            ],
            recovery=Recovery(sleep=RecordedSleeps()),
        ),
    )
    general = Agent("General.", name="general", model=FunctionModel(lambda r: "hello", name="general"))
    return Agent(
        "Desk",
        name="desk",
        model=classifier(("billing", 11)),
        architecture=Router(
            routes=[RouterRoute("billing", billing, "payments"), RouterRoute("general", general, "rest")]
        ),
        runtime=JournalRuntime(MemoryJournal()),
    )


@pytest.mark.anyio
async def test_each_decision_of_a_nested_router_shows_its_own_classification() -> None:
    desk = nested_desk()
    result = await desk.run("send me the invoice", session_id="s")
    assert (result.status, result.output) == ("ok", "invoice sent")
    assert isinstance(desk.runtime, JournalRuntime)
    [run] = (await load_trace(desk.runtime.journal, "s")).runs
    shown = [(d["router"], d["route"], d["usage"]["input_tokens"] if d["usage"] else None) for d in run.decisions]
    assert shown == [("desk", "billing", 11), ("billing", "refunds", 21), ("billing", "invoices", 22)]
