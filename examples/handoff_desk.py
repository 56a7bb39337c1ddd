"""A support desk that routes by tool call, with handoffs between specialists and sticky sessions.

``HandoffRouter`` is the :class:`~jeeves_router.Router` preset for this: the router model's only
job is to call one generated ``classify_as_<route>`` tool (a ``ToolCallClassifier``), specialists
may ``transfer_to_<agent>`` each other or hand back to the desk (``hand_back=True``), and
follow-up turns of a session go straight to the specialist that answered last (``sticky=True``).
Any other classifier gets the same with ``Router(routes, classifier=..., sticky=True, hand_back=True)``.

Runs with no API key on scripted models. With ``OPENAI_API_KEY`` or ``ANTHROPIC_API_KEY`` set
it uses the real provider (``pip install 'jeeves-router[openai]'`` / ``[anthropic]``)::

    python examples/handoff_desk.py
"""

from __future__ import annotations

import logging
import os

import anyio

from jeeves_router import Agent, HandoffRouter, Message, RouterRoute, tool
from jeeves_router.events import HandoffCompleted, HandoffRejected, RouterClassified, RouterDispatched, TextDelta
from jeeves_router.models import Model
from jeeves_router.testing import Call, Chunks, ScriptedModel

INVOICES = {"INV-1001": {"amount": 42.0, "status": "paid twice"}}

TURNS = (
    "I was charged twice for invoice INV-1001",
    "Also, the API returns 500 when I download that invoice",
    "Thanks!",
)


@tool
def lookup_invoice(invoice_id: str) -> dict[str, object]:
    """Look up an invoice by its id (e.g. INV-1001)."""
    invoice = INVOICES.get(invoice_id)
    if invoice is None:
        raise KeyError(f"no invoice {invoice_id}")
    return {"id": invoice_id, **invoice}


def build_desk(router: Model | str, billing: Model | str, technical: Model | str, general: Model | str) -> Agent:
    """The desk with the given models (objects or ``"provider:model"`` strings)."""
    technical_agent = Agent("You debug API errors. Be concise.", name="technical", model=technical)
    billing_agent = Agent(
        "You resolve payments, invoices and refunds. Look invoices up before answering. "
        "Transfer API problems to technical.",
        name="billing",
        model=billing,
        tools=[lookup_invoice],
        handoffs=[technical_agent],
    )
    general_agent = Agent("You answer everything else, briefly.", name="general", model=general)
    return Agent(
        "Customer support desk.",
        name="desk",
        model=router,
        architecture=HandoffRouter(
            routes=[
                RouterRoute("billing", billing_agent, "payments, invoices, refunds"),
                RouterRoute("technical", technical_agent, "errors, bugs, API problems"),
                RouterRoute("general", general_agent, "anything else"),
            ],
            fallback_route="general",
            require_confidence_above=0.6,
            history_turns=2,
        ),
    )


def models_from_environment() -> tuple[Model | str, Model | str, Model | str, Model | str]:
    """Real providers when a key is set, scripted models otherwise."""
    if os.environ.get("OPENAI_API_KEY"):
        return ("openai:gpt-4.1-nano", "openai:gpt-4.1-mini", "openai:gpt-4.1-mini", "openai:gpt-4.1-mini")
    if os.environ.get("ANTHROPIC_API_KEY"):
        m = "anthropic:claude-haiku-4-5"
        return (m, m, m, m)
    return (
        ScriptedModel([Call("classify_as_billing", {"reason": "duplicate charge", "confidence": 0.93})], name="router"),
        ScriptedModel(
            [
                Call("lookup_invoice", {"invoice_id": "INV-1001"}),
                Chunks("Invoice INV-1001 ", "was paid twice; ", "I have refunded the duplicate 42.00."),
                Call("transfer_to_technical", {"reason": "HTTP 500 on invoice download"}),
            ],
            name="billing",
        ),
        ScriptedModel(
            [Chunks("That 500 is a known ", "export bug; retry with ?format=pdf."), "You're welcome!"], name="technical"
        ),
        ScriptedModel(["Happy to help."], name="general"),
    )


async def main() -> None:
    """Three turns of one session: routed, handed off, then sticky."""
    desk = build_desk(*models_from_environment())
    history: list[Message] = []
    for text in TURNS:
        print(f"> {text}")
        async with desk.stream(text, session_id="demo-1", history=history) as events:
            why = ""
            async for ev in events:
                if isinstance(ev, RouterClassified):
                    why = ev.reason or ""
                elif isinstance(ev, HandoffCompleted) and ev.sticky:
                    why = "sticky session"  # the session's last agent, with no classification
                elif isinstance(ev, RouterDispatched):
                    print(f"[desk -> {ev.route}: {why}]")
                elif isinstance(ev, HandoffCompleted):
                    print(f"[{ev.from_agent} -> {ev.to_agent}: {ev.reason or ''}]")
                elif isinstance(ev, HandoffRejected):
                    print(f"[handoff {ev.from_agent} -> {ev.to_agent} rejected: {ev.why}]")
                elif isinstance(ev, TextDelta):
                    print(ev.text, end="", flush=True)
        print()
        result = events.result
        if result is None:
            break
        history.extend(result.messages)
        print(f"[status={result.status} answered by {result.route}; {result.usage.requests} model requests]\n")


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")  # stderr
    anyio.run(main)
