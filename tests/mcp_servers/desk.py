"""A support desk with deterministic test models, served by ``jeeves-router mcp`` in the tests."""

from __future__ import annotations

from jeeves_router import Agent, Router, RouterRoute
from jeeves_router.models.base import ModelRequest
from jeeves_router.testing import FunctionModel


def _last_user_text(request: ModelRequest) -> str:
    return request.messages[-1].text if request.messages else ""


def _classify(request: ModelRequest) -> str:
    text = _last_user_text(request).lower()
    if "charged" in text or "invoice" in text:
        return "route: billing\nconfidence: 0.9"
    if "error" in text:
        return "route: technical\nconfidence: 0.8"
    return "route: technical\nconfidence: 0.2"  # below the threshold: the fallback answers


billing = Agent(
    "You resolve payments.", name="billing", model=FunctionModel(lambda r: "Refund issued.", name="billing")
)
technical = Agent(
    "You debug APIs.", name="technical", model=FunctionModel(lambda r: "Retry with backoff.", name="tech")
)
general = Agent("You answer the rest.", name="general", model=FunctionModel(lambda r: "Happy to help.", name="general"))

desk = Agent(
    "Customer support desk\n(routes to billing, technical or general)",
    name="desk",
    model=FunctionModel(_classify, name="classifier"),
    architecture=Router(
        [
            RouterRoute("billing", billing, "payments, invoices, refunds"),
            RouterRoute("technical", technical, "errors, bugs, API problems"),
            RouterRoute("general", general, "anything else"),
        ],
        fallback_route="general",
        require_confidence_above=0.5,
    ),
)


def make_unresolved_desk() -> Agent:
    """A desk without a fallback: low confidence ends unresolved."""
    return Agent(
        "Strict desk",
        name="strict",
        model=FunctionModel(_classify, name="classifier"),
        architecture=Router(
            [RouterRoute("billing", billing), RouterRoute("technical", technical)], require_confidence_above=0.5
        ),
    )
