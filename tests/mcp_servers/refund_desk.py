"""A desk whose billing specialist makes one refund per run, served by ``jeeves-router mcp`` in the tests.

Every refund is appended to the file named by ``$REFUND_LOG``, so a test can count the refunds
made across server processes. The desk has no runtime: ``--journal`` gives it one.
"""

from __future__ import annotations

import os

from jeeves_router import Agent, Router, RouterRoute
from jeeves_router.messages import ToolResultPart
from jeeves_router.models.base import ModelRequest
from jeeves_router.testing import Call, FunctionModel, Reply
from jeeves_router.tools import tool


@tool
def refund(invoice: str) -> str:
    """Refund an invoice."""
    fd = os.open(os.environ["REFUND_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, f"refund {invoice}\n".encode())
    finally:
        os.close(fd)
    return f"refunded {invoice}"


def _billing(request: ModelRequest) -> Reply:
    if not any(isinstance(p, ToolResultPart) for m in request.messages for p in m.parts):
        return Reply(calls=(Call("refund", {"invoice": "INV-1"}),))
    return Reply(text="Refund issued for INV-1.")


def _classify(request: ModelRequest) -> str:
    text = request.messages[-1].text.lower() if request.messages else ""
    return "route: billing\nconfidence: 0.9" if "refund" in text else "route: general\nconfidence: 0.9"


billing = Agent("You refund.", name="billing", model=FunctionModel(_billing, name="billing"), tools=[refund])
general = Agent("You answer the rest.", name="general", model=FunctionModel(lambda r: "Happy to help.", name="general"))
desk = Agent(
    "Refund desk",
    name="desk",
    model=FunctionModel(_classify, name="classifier"),
    architecture=Router([RouterRoute("billing", billing), RouterRoute("general", general)]),
)
