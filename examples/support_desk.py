"""A support desk: billing / technical / general specialists behind a Router.

Runs with no API key on scripted models. With ``OPENAI_API_KEY`` or ``ANTHROPIC_API_KEY`` set
it uses the real provider (``pip install 'jeeves-router[openai]'`` / ``[anthropic]``)::

    python examples/support_desk.py "I was charged twice"
"""

from __future__ import annotations

import logging
import os
import sys

import anyio

from jeeves_router import Agent, Router, RouterRoute, tool
from jeeves_router.events import RouterClassified, TextDelta
from jeeves_router.models import Model
from jeeves_router.testing import Call, Chunks, ScriptedModel

INVOICES = {"INV-1001": {"amount": 42.0, "status": "paid twice"}}


@tool
def lookup_invoice(invoice_id: str) -> dict[str, object]:
    """Look up an invoice by its id (e.g. INV-1001)."""
    invoice = INVOICES.get(invoice_id)
    if invoice is None:
        raise KeyError(f"no invoice {invoice_id}")
    return {"id": invoice_id, **invoice}


def build_desk(
    classifier: Model | str,
    billing: Model | str,
    technical: Model | str,
    general: Model | str,
) -> Agent:
    """The desk with the given models (objects or ``"provider:model"`` strings)."""
    billing_agent = Agent(
        "You resolve payments, invoices and refunds. Look invoices up before answering.",
        name="billing",
        model=billing,
        tools=[lookup_invoice],
    )
    technical_agent = Agent("You debug API errors. Be concise.", name="technical", model=technical)
    general_agent = Agent("You answer everything else, briefly.", name="general", model=general)
    return Agent(
        "Customer support desk",
        name="desk",
        model=classifier,
        architecture=Router(
            routes=[
                RouterRoute("billing", billing_agent, "payments, invoices, refunds"),
                RouterRoute("technical", technical_agent, "errors, bugs, API problems"),
                RouterRoute("general", general_agent, "anything else"),
            ],
            fallback_route="general",
            require_confidence_above=0.6,
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
        ScriptedModel(["route: billing\nconfidence: 0.93"], name="classifier"),
        ScriptedModel(
            [
                Call("lookup_invoice", {"invoice_id": "INV-1001"}),
                Chunks("Invoice INV-1001 ", "was paid twice. ", "I have refunded ", "the duplicate 42.00."),
            ],
            name="billing",
        ),
        ScriptedModel(["Check your API key."], name="technical"),
        ScriptedModel(["Happy to help."], name="general"),
    )


def desk() -> Agent:
    """The desk on this environment's models (``jeeves-router graph examples.support_desk:desk``)."""
    return build_desk(*models_from_environment())


async def main(text: str) -> None:
    """Stream one request through the desk and print what happens."""
    async with desk().stream(text, session_id="demo-1") as events:
        async for ev in events:
            if isinstance(ev, RouterClassified):
                print(f"[routed to {ev.route} with confidence {ev.confidence:.2f}]")
            elif isinstance(ev, TextDelta):
                print(ev.text, end="", flush=True)
    print()
    result = events.result
    if result is not None:
        print(
            f"[status={result.status} route={result.route} usage={result.usage.total_tokens} tokens "
            f"in {result.usage.requests} requests]"
        )


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")  # stderr
    anyio.run(main, " ".join(sys.argv[1:]) or "I was charged twice for invoice INV-1001")
