"""Serve a support desk as an OpenAI-compatible endpoint, with sessions kept in a journal.

Runs with no API key on fake models (a keyword classifier and specialists that say how many
earlier messages of the conversation they see)::

    jeeves-router serve examples.serve_desk:desk --journal runs.db      # or:
    python examples/serve_desk.py --port 8000 --journal runs.db

Then any OpenAI client talks to it (``model`` is the agent's name)::

    from openai import OpenAI
    client = OpenAI(base_url="http://127.0.0.1:8000/v1", api_key="unused")
    reply = client.chat.completions.create(
        model="desk", messages=[{"role": "user", "content": "I was charged twice"}],
        extra_body={"session_id": "s-42"},
    )
    reply.choices[0].message.content, reply.model_extra["jeeves"]["route"]

``curl -N localhost:8000/v1/runs -d '{"model": "desk", "input": "the API returns 500"}'``
streams the typed events; ``curl localhost:8000/v1/sessions/s-42`` shows the session's turns.
To listen beyond loopback, set a token: ``DESK_TOKEN=... jeeves-router serve ... --host 0.0.0.0
--token-env DESK_TOKEN``.
"""

from __future__ import annotations

import argparse
import re

import anyio

from jeeves_router import Agent, Router, RouterRoute
from jeeves_router.models.base import ModelRequest
from jeeves_router.testing import Chunks, FunctionModel, Reply

KEYWORDS = {"billing": r"charge|refund|invoice|paid", "technical": r"error|500|api|bug|crash"}


def classify(request: ModelRequest) -> str:
    """A keyword classifier standing in for an LLM: answers ``route:`` / ``confidence:``."""
    text = request.messages[-1].text.lower()
    for route, pattern in KEYWORDS.items():
        if re.search(pattern, text):
            return f"route: {route}\nconfidence: 0.92"
    return "route: general\nconfidence: 0.55"


def specialist(name: str, latency_s: float = 0.0) -> FunctionModel:
    """A fake specialist that streams an answer naming itself and the history it sees."""

    async def answer(request: ModelRequest) -> Reply:
        if latency_s:
            await anyio.sleep(latency_s)
        earlier = len(request.messages) - 1
        return Reply(text=Chunks(f"[{name}] ", "Happy to help ", f"(I see {earlier} earlier messages)."))

    return FunctionModel(answer, name=name)


def build_desk(latency_s: float = 0.0) -> Agent:
    """The desk: a router in front of billing, technical and general specialists."""

    async def classifier(request: ModelRequest) -> str:
        if latency_s:
            await anyio.sleep(latency_s)
        return classify(request)

    routes = [
        RouterRoute(n, Agent(f"You handle {n} questions.", name=n, model=specialist(n, latency_s)), d)
        for n, d in (("billing", "payments, refunds"), ("technical", "errors, bugs"), ("general", "anything else"))
    ]
    return Agent(
        "Customer support desk",
        name="desk",
        model=FunctionModel(classifier, name="classifier"),
        architecture=Router(routes=routes, fallback_route="general", require_confidence_above=0.6),
    )


desk = build_desk()

if __name__ == "__main__":
    from jeeves_router.serve import serve

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--journal", default="runs.db")
    args = parser.parse_args()
    print(f"serving model 'desk' on http://127.0.0.1:{args.port}/v1 (journal {args.journal})", flush=True)
    serve(desk, port=args.port, journal=args.journal)
