"""Durable routed runs on DBOS: N worker processes on M machines sharing one PostgreSQL.

Every worker runs this file with its own executor id; any process can enqueue requests
and read the results back by workflow id. A worker that dies mid-run is recovered when a
worker with the same executor id starts again: completed steps (classification, model
calls, tool calls) are not repeated.

    eval "$(scripts/postgres.sh)"     # or: export JEEVES_PG_URL=postgresql://user:pw@db-host:5432/jeeves
    python examples/durable_workers.py worker --executor-id "$(hostname)-1" &
    python examples/durable_workers.py worker --executor-id "$(hostname)-2" &
    python examples/durable_workers.py enqueue "I was charged twice" "The API returns 500" "hi!"

It needs the ``dbos`` extra (``pip install 'jeeves-router[dbos]'``; ``[dbos,openai]`` for real models).
With OPENAI_API_KEY set the desk uses OpenAI models; without it, offline stand-ins.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import uuid

from jeeves_router import Agent
from jeeves_router.architectures.router.router import Router, RouterRoute
from jeeves_router.durable.dbos import DBOSRuntime, DurableAgents, dbos_client, dbos_config, enqueue_run, run_result
from jeeves_router.journal import current_idempotency_key
from jeeves_router.models.base import ModelRequest
from jeeves_router.testing import FunctionModel, Reply
from jeeves_router.tools import tool

URL = os.environ.get("JEEVES_PG_URL", "sqlite:///jeeves_dbos.sqlite")
APP = "support-desk"


@tool
async def lookup_invoice(invoice: str) -> str:
    """Look up the payments of an invoice."""
    # A tool with side effects would pass this key to the remote system: stable across recoveries.
    _ = current_idempotency_key()
    return f"{invoice}: two payments of 19.90 EUR"


def offline_model(request: ModelRequest) -> str | Reply:
    """Stand-in for a real model: classifies by keyword, answers in one sentence."""
    text = request.messages[-1].text.lower()
    if request.purpose == "classify":
        route = "billing" if "charged" in text or "invoice" in text else "technical" if "api" in text else "general"
        return f"route: {route}\nconfidence: 0.9"
    return f"({request.system}) Noted: {request.messages[-1].text}"


def build_desk() -> Agent:
    """The same desk in every process: a router in front of three specialists."""
    real = bool(os.environ.get("OPENAI_API_KEY"))
    model = "openai:gpt-4.1-mini" if real else FunctionModel(offline_model, name="offline")
    runtime = DBOSRuntime()
    billing = Agent("You resolve payments.", name="billing", model=model, tools=[lookup_invoice], runtime=runtime)
    technical = Agent("You debug API errors.", name="technical", model=model, runtime=runtime)
    general = Agent("You answer everything else.", name="general", model=model, runtime=runtime)
    routes = [
        RouterRoute("billing", billing, "payments, invoices, refunds"),
        RouterRoute("technical", technical, "errors, bugs, API problems"),
        RouterRoute("general", general, "anything else"),
    ]
    return Agent(
        "Customer support desk",
        name="desk",
        model="openai:gpt-4.1-nano" if real else model,
        runtime=runtime,
        architecture=Router(routes, fallback_route="general"),
    )


# Registered at import, before DBOS.launch(), identically in every process.
DURABLE = DurableAgents([build_desk()])


async def worker(executor_id: str, concurrency: int) -> None:
    from dbos import DBOS  # after jeeves_router.durable.dbos, which names the extra when DBOS is missing

    DBOS(config=dbos_config(APP, URL, executor_id=executor_id))
    DBOS.launch()  # also recovers runs this executor id left unfinished
    await DURABLE.register_queue(worker_concurrency=concurrency)
    print(f"worker {executor_id} serving queue {DURABLE.queue!r} on {URL.split('@')[-1]}", flush=True)
    await asyncio.Event().wait()


async def enqueue(prompts: list[str]) -> None:
    from dbos import DBOS

    DBOS.migrate(URL)  # the client needs the schema; a no-op once it exists
    client = dbos_client(URL)
    try:
        ids = [await enqueue_run(client, p, agent="desk", session_id=f"demo-{uuid.uuid4().hex[:8]}") for p in prompts]
        for prompt, wid in zip(prompts, ids, strict=True):
            result = await run_result(client, wid)
            print(f"{wid}  {result.route:<10} {prompt!r} -> {result.output!r}")
    finally:
        client.destroy()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("worker", help="serve the queue")
    w.add_argument("--executor-id", required=True, help="unique and stable per worker process")
    w.add_argument("--concurrency", type=int, default=8, help="runs at once in this worker")
    e = sub.add_parser("enqueue", help="enqueue requests and print their results")
    e.add_argument("prompts", nargs="+")
    args = parser.parse_args()
    if args.cmd == "worker":
        asyncio.run(worker(args.executor_id, args.concurrency))
    else:
        asyncio.run(enqueue(args.prompts))


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")  # stderr
    main()
