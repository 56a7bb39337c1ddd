"""A billing specialist whose tools live on an MCP server, and a desk served over MCP.

Runs offline, no API key: this file is also the MCP server (``--serve`` starts it over
stdio, built with the ``mcp`` package), and a deterministic function stands in for the
model (swap in ``model="openai:gpt-4.1-mini"``). Needs the ``mcp`` extra::

    pip install 'jeeves-router[mcp]'
    python examples/mcp_tools.py "I was charged twice for INV-7"

The agent starts the server when its run starts and stops it when the run ends;
``async with server:`` keeps one server process for many runs. The desk at the bottom can
itself be served to MCP clients (Claude Desktop, an IDE, another agent)::

    jeeves-router mcp examples.mcp_tools:desk                 # stdio
    jeeves-router mcp examples.mcp_tools:desk --transport http --port 8000
"""

from __future__ import annotations

import logging
import os
import re
import sys

import anyio

from jeeves_router import Agent, Router, RouterRoute
from jeeves_router.events import ToolCalled, ToolResult
from jeeves_router.mcp import MCPServerStdio
from jeeves_router.models.base import ModelRequest
from jeeves_router.testing import Call, FunctionModel, Reply

INVOICES = {"INV-7": 42.0, "INV-8": 19.5}


def serve() -> None:
    """The MCP server: two billing tools."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    server = MCPServer("billing-tools", log_level="WARNING")

    @server.tool()
    def lookup_invoice(invoice: str) -> str:
        """Find an invoice: its amount and how often it was charged."""
        if invoice not in INVOICES:
            raise ToolError(f"no invoice {invoice}")  # the model sees this message
        return f"{invoice}: {INVOICES[invoice]:.2f} EUR, charged 2 times"

    @server.tool()
    def refund(invoice: str, amount: float) -> str:
        """Refund an amount of an invoice."""
        return f"refunded {amount:.2f} EUR on {invoice}"

    server.run()  # stdio


def billing_model(request: ModelRequest) -> Reply | str:
    """Stands in for an LLM: look the invoice up, refund the duplicate, then answer."""
    last = request.messages[-1]
    if last.role == "user":
        match = re.search(r"INV-\d+", last.text)
        return Reply(calls=[Call("lookup_invoice", {"invoice": match.group(0) if match else "?"})])
    result = last.parts[0].content  # type: ignore[union-attr]
    if "charged 2 times" in result:
        invoice, amount = result.split(":")[0], float(result.split()[1])
        return Reply(calls=[Call("refund", {"invoice": invoice, "amount": amount})])
    return f"Done: {result}." if "refunded" in result else "I could not find that invoice."


tools = MCPServerStdio(
    sys.executable,
    [os.path.abspath(__file__), "--serve"],
    env={"PYTHONPATH": os.environ.get("PYTHONPATH", "")},
    name="billing-tools",
    timeout=10,
)
billing = Agent("You resolve payments.", name="billing", model=FunctionModel(billing_model), tools=[tools])
general = Agent("You answer the rest.", name="general", model=FunctionModel(lambda r: "Happy to help."))
desk = Agent(
    "Customer support desk",
    name="desk",
    model=FunctionModel(
        lambda r: "route: billing\nconfidence: 0.9" if "INV" in r.messages[-1].text else "route: general"
    ),
    architecture=Router([RouterRoute("billing", billing), RouterRoute("general", general)], fallback_route="general"),
)


async def main(prompt: str) -> None:
    logging.basicConfig(level=logging.WARNING)
    async with desk.stream(prompt) as events:
        async for ev in events:
            if isinstance(ev, ToolCalled):
                print(f"  -> {ev.tool}({ev.arguments})")
            elif isinstance(ev, ToolResult):
                print(f"  <- {ev.content}{' (error)' if ev.is_error else ''}")
    result = events.result
    assert result is not None
    print(f"[{result.route}] {result.output}")
    # one server process for several runs:
    async with tools:
        for invoice in ("INV-8", "INV-9"):
            print(f"[{invoice}]", (await billing.run(f"refund {invoice}")).output)


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        serve()
    else:
        anyio.run(main, " ".join(sys.argv[1:]) or "I was charged twice for INV-7")
