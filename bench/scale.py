"""Many concurrent routed runs on one event loop: jeeves_router beside LangGraph, same run.

Job per run: one classification on a fake model that sleeps 20 ms and answers
``route: billing / confidence: 0.9``; dispatch to the billing specialist, whose fake model
sleeps 20 ms and streams its answer in 20 chunks; the caller consumes the events. N runs
are started at once on one asyncio loop (N = 1,000 and 10,000 by default), with the
default garbage collector.

Reported per framework and N:

* wall time of the N runs (median of ``--repeat`` rounds);
* bytes per in-flight run: ``tracemalloc`` current size with all N runs parked inside the
  specialist's model call, minus the size before they started, divided by N;
* GC-tracked objects per in-flight run: ``len(gc.get_objects())`` measured the same way.

A first row, "asyncio alone (floor)", runs the same job shape with no framework (two waits and 20
chunks through an async generator): the event loop's own cost, under which no framework can go.

The in-flight figures come from a separate round where the fake specialist waits on an
event instead of sleeping, so every run is parked at the same point when measured.

Usage: ``python bench/scale.py [--n 1000 10000] [--repeat 3] [--no-peers]``; LangGraph comes from
``bench/requirements.txt``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import sys
import time
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypedDict

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from jeeves_router import Agent, Router, RouterRoute
from jeeves_router.messages import TextPart
from jeeves_router.models.base import ModelRequest, ModelResponse, ModelStreamItem, ModelTextDelta
from jeeves_router.usage import Usage

ROUTES = ("billing", "technical", "general")
CLASSIFIER_REPLY = "route: billing\nconfidence: 0.9"
CHUNKS = tuple(f"chunk {i:02d} " for i in range(20))
ANSWER = "".join(CHUNKS)
SLEEP_S = 0.020
_USAGE = Usage(input_tokens=10, output_tokens=5, requests=1, cost_usd=0.0)


class Gate:
    """Where the fake specialist waits: a 20 ms sleep, or (for the in-flight census) an event."""

    def __init__(self) -> None:
        self.parked = 0
        self.expected = 0
        self.all_parked = asyncio.Event()
        self.release: asyncio.Event | None = None

    async def wait(self) -> None:
        if self.release is None:
            await asyncio.sleep(SLEEP_S)
            return
        self.parked += 1
        if self.parked == self.expected:
            self.all_parked.set()
        await self.release.wait()

    def census(self, n: int) -> None:
        self.parked, self.expected = 0, n
        self.all_parked = asyncio.Event()
        self.release = asyncio.Event()

    def timed(self) -> None:
        self.release = None


GATE = Gate()


# ----------------------------------------------------------------------------- jeeves_router


class SleepyClassifierModel:
    """Sleeps 20 ms, then answers the classification."""

    name = "bench:classifier"
    _response = ModelResponse((TextPart(CLASSIFIER_REPLY),), _USAGE, "end", "fake")

    async def request(self, request: ModelRequest) -> ModelResponse:
        await asyncio.sleep(SLEEP_S)
        return self._response

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:  # pragma: no cover
        yield await self.request(request)


class SleepySpecialistModel:
    """Sleeps 20 ms (or parks at the gate), then streams the answer in 20 chunks."""

    name = "bench:specialist"
    _deltas = tuple(ModelTextDelta(c) for c in CHUNKS)
    _response = ModelResponse((TextPart(ANSWER),), _USAGE, "end", "fake")

    async def request(self, request: ModelRequest) -> ModelResponse:  # pragma: no cover
        await GATE.wait()
        return self._response

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        await GATE.wait()
        for d in self._deltas:
            yield d
        yield self._response


def build_desk() -> Agent:
    specialist = SleepySpecialistModel()
    routes = [RouterRoute(r, Agent(f"You handle {r}.", name=r, model=specialist), r) for r in ROUTES]
    return Agent(
        "Support desk",
        name="desk",
        model=SleepyClassifierModel(),
        architecture=Router(routes, fallback_route="general", require_confidence_above=0.6),
    )


DESK = build_desk()


async def jeeves_router_one(i: int) -> None:
    text = 0
    async with DESK.stream("I was charged twice", session_id=f"s{i}") as events:
        async for ev in events:
            if ev.kind == "text.delta":
                text += 1
    if text != len(CHUNKS) or events.result is None or events.result.output != ANSWER:
        raise AssertionError(f"jeeves_router: {events.result!r}")


# ----------------------------------------------------------------------------- langgraph


class _LGState(TypedDict, total=False):
    text: str
    route: str
    confidence: float
    answer: str


def build_langgraph() -> Any:
    from langgraph.config import get_stream_writer
    from langgraph.graph import START, StateGraph
    from langgraph.types import Command

    async def classify(state: _LGState) -> Command[str]:
        await asyncio.sleep(SLEEP_S)
        fields = dict(line.split(":", 1) for line in CLASSIFIER_REPLY.splitlines())
        route = fields["route"].strip()
        return Command(goto=route if route in ROUTES else "general", update={"route": route})

    async def specialist(state: _LGState) -> _LGState:
        write = get_stream_writer()
        await GATE.wait()
        for chunk in CHUNKS:
            write(chunk)
        return {"answer": ANSWER}

    graph = StateGraph(_LGState)
    graph.add_node("classify", classify, destinations=ROUTES)
    for route in ROUTES:
        graph.add_node(route, specialist)
    graph.add_edge(START, "classify")
    return graph.compile()


_LG: Any = None


async def langgraph_one(i: int) -> None:
    chunks = 0
    answer = ""
    async for mode, payload in _LG.astream({"text": "I was charged twice"}, stream_mode=["custom", "updates"]):
        if mode == "custom":
            chunks += 1
        elif "billing" in payload:
            answer = payload["billing"]["answer"]
    if chunks != len(CHUNKS) or answer != ANSWER:
        raise AssertionError("langgraph: wrong answer")


# ----------------------------------------------------------------------------- the floor


async def _bare_specialist() -> AsyncIterator[str]:
    await GATE.wait()
    for chunk in CHUNKS:
        yield chunk


async def asyncio_floor_one(i: int) -> None:
    """The same job with no framework: two waits and 20 chunks through an async generator.

    The line under which no framework on this event loop can go; printed for scale, not a peer.
    """
    await asyncio.sleep(SLEEP_S)
    fields = dict(line.split(":", 1) for line in CLASSIFIER_REPLY.splitlines())
    if fields["route"].strip() not in ROUTES:
        raise AssertionError("floor: wrong route")
    chunks = [c async for c in _bare_specialist()]
    if "".join(chunks) != ANSWER:
        raise AssertionError("floor: wrong answer")


# ----------------------------------------------------------------------------- measuring

One = Callable[[int], Awaitable[None]]


async def wall(one: One, n: int) -> float:
    GATE.timed()
    gc.collect()
    start = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(n)))
    return time.perf_counter() - start


async def census(one: One, n: int) -> tuple[float, float]:
    """(bytes, GC-tracked objects) per in-flight run, all N parked in the specialist call."""
    GATE.census(n)
    gc.collect()
    objects_before = len(gc.get_objects())
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    tasks = [asyncio.ensure_future(one(i)) for i in range(n)]
    await GATE.all_parked.wait()
    gc.collect()
    size = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    # the tasks themselves (one asyncio task per run) are counted: a run needs one
    objects = len(gc.get_objects()) - objects_before
    assert GATE.release is not None
    GATE.release.set()
    await asyncio.gather(*tasks)
    GATE.timed()
    return size / n, objects / n


async def main(ns: list[int], repeat: int, peers: bool) -> None:
    global _LG
    contenders: dict[str, One] = {
        "asyncio alone (floor)": asyncio_floor_one,
        "jeeves_router (stream)": jeeves_router_one,
    }
    try:
        if peers:
            _LG = build_langgraph()
            contenders["langgraph"] = langgraph_one
    except ImportError:
        print("langgraph is not installed (pip install -r bench/requirements.txt): jeeves_router only\n")
    for one in contenders.values():  # warm up
        await wall(one, 50)
    load = os.getloadavg()
    print(f"N concurrent routed runs, fake models sleeping {SLEEP_S * 1000:.0f} ms, {len(CHUNKS)} streamed chunks")
    print(f"(median wall of {repeat} rounds; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f})\n")
    print("| framework | N | wall s | bytes / in-flight run | GC-tracked objects / in-flight run |")
    print("|---|---|---|---|---|")
    for n in ns:
        for name, one in contenders.items():
            walls = []
            for _ in range(repeat):
                walls.append(await wall(one, n))
            per_run, objects = await census(one, n)
            print(f"| {name} | {n:,} | {statistics.median(walls):.3f} | {per_run:,.0f} | {objects:.1f} |")
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[1000, 10000], help="concurrent runs (default 1000 10000)")
    parser.add_argument("--repeat", type=int, default=3, help="timed rounds per N (default 3)")
    parser.add_argument("--no-peers", action="store_true", help="jeeves_router only (no LangGraph)")
    args = parser.parse_args()
    if any(n < 1 for n in args.n) or args.repeat < 1:
        parser.error("--n and --repeat must be positive")
    asyncio.run(main(args.n, args.repeat, not args.no_peers))
