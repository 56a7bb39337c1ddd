"""Framework overhead of one routed request: jeeves_router beside its peers, same run.

Job: one classification on a fake model ("route: billing / confidence: 0.9"), dispatch to
the billing specialist, the specialist's answer streamed in five chunks and consumed by the
caller as events. Fake models return canned data, so what is timed is the framework.
Peers (openai-agents, langgraph, pydantic-ai) come from ``bench/peers.py``; install them with
``pip install -r bench/requirements.txt``. Timings are taken in alternating blocks
(see ``peers.measure_all``), median of N.

Usage: ``python bench/overhead.py [N]``
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _cli import runs_arg

# Options first, so --help works before the peers (an optional install) are imported.
RUNS = runs_arg(__doc__) if __name__ == "__main__" else 200

from peers import ANSWER, ANSWER_CHUNKS, CLASSIFIER_REPLY, PEERS, measure_all

from jeeves_router import Agent, Router, RouterRoute
from jeeves_router.messages import TextPart
from jeeves_router.models.base import ModelRequest, ModelResponse, ModelStreamItem, ModelTextDelta
from jeeves_router.usage import Usage

_USAGE = Usage(input_tokens=10, output_tokens=5, requests=1, cost_usd=0.0)


class CannedModel:
    """A fake model answering every request with the same canned reply (chunked when streamed)."""

    def __init__(self, chunks: tuple[str, ...]) -> None:
        self._deltas = tuple(ModelTextDelta(c) for c in chunks)
        self._response = ModelResponse((TextPart("".join(chunks)),), _USAGE, "end", "canned")

    @property
    def name(self) -> str:
        return "bench:canned"

    async def request(self, request: ModelRequest) -> ModelResponse:
        return self._response

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        for d in self._deltas:
            yield d
        yield self._response


def _build_desk() -> Agent:
    specialists = {
        name: Agent(f"You handle {name}.", name=name, model=CannedModel(ANSWER_CHUNKS))
        for name in ("billing", "technical", "general")
    }
    return Agent(
        "Customer support desk",
        name="desk",
        model=CannedModel((CLASSIFIER_REPLY,)),
        architecture=Router(
            routes=[
                RouterRoute("billing", specialists["billing"], "payments, invoices, refunds"),
                RouterRoute("technical", specialists["technical"], "errors, bugs, API problems"),
                RouterRoute("general", specialists["general"], "anything else"),
            ],
            fallback_route="general",
            require_confidence_above=0.6,
        ),
    )


_DESK = _build_desk()


async def jeeves_router_routed(text: str) -> str:
    """One routed request through jeeves_router, stream consumed."""
    chunks: list[str] = []
    result = None
    async with _DESK.stream(text, session_id="bench") as events:
        async for ev in events:
            if ev.kind == "text.delta":
                chunks.append(ev.text)
            elif ev.kind == "run.completed" and ev.path == ("desk",):
                result = ev.result
    if result is None or result.route != "billing" or result.output != ANSWER or "".join(chunks) != ANSWER:
        raise AssertionError(f"jeeves_router returned {result!r}")
    return result.output


async def jeeves_router_run(text: str) -> str:
    """The same request through ``run()`` (no stream consumer)."""
    result = await _DESK.run(text, session_id="bench")
    assert result.output == ANSWER
    return result.output


async def main(n: int) -> None:
    contenders = {"jeeves_router (stream)": jeeves_router_routed, "jeeves_router (run)": jeeves_router_run, **PEERS}
    medians = await measure_all(contenders, n)
    fastest_peer = min(v for k, v in medians.items() if k in PEERS)
    ours = medians["jeeves_router (stream)"]
    print(f"Median framework overhead of one routed request (n={n}, alternating blocks of n/5, same run)\n")
    print("| framework | median ms | x jeeves_router (stream) |")
    print("|---|---|---|")
    for name, ms in sorted(medians.items(), key=lambda kv: kv[1]):
        print(f"| {name} | {ms:.4f} | {ms / ours:.1f} |")
    print(f"\njeeves_router (stream) / fastest peer = {ours / fastest_peer:.3f} (goal <= 0.1)")


if __name__ == "__main__":
    asyncio.run(main(RUNS))
