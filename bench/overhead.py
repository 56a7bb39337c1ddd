"""Framework overhead of one routed request: jeeves_router beside its peers, same run.

Job: one classification on a fake model ("route: billing / confidence: 0.9"), dispatch to
the billing specialist, the specialist's answer streamed in five chunks and consumed by the
caller as events. Fake models return canned data, so what is timed is the framework.
Peers (openai-agents, langgraph, pydantic-ai) come from ``bench/peers.py``; install them with
``pip install -r bench/requirements.txt``. Timings are taken in alternating blocks
(see ``peers.measure_all``), median of N.

Usage: ``python bench/overhead.py [N]``

``python bench/overhead.py --otel [N]`` instead measures the cost of the OpenTelemetry hooks on
the same request, in one run: OpenTelemetry absent (its API module not loaded, as when the
``otel`` extra is not installed or never imported), imported but unconfigured (no tracer
provider: the hooks must cost nothing measurable, goal within 5%), and configured with the SDK
(spans built, no exporter). Needs the SDK (``pip install opentelemetry-sdk``).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import ANSWER, ANSWER_CHUNKS, CLASSIFIER_REPLY, measure_all

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
    from peers import PEERS  # the peer frameworks (bench/requirements.txt)

    contenders = {"jeeves_router (stream)": jeeves_router_routed, "jeeves_router (run)": jeeves_router_run, **PEERS}
    load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    medians = await measure_all(contenders, n)
    load_after = " ".join(f"{x:.2f}" for x in os.getloadavg())
    fastest_peer = min(v for k, v in medians.items() if k in PEERS)
    ours = medians["jeeves_router (stream)"]
    print(f"Median framework overhead of one routed request (n={n}, alternating blocks of n/5, same run)")
    print(f"load average before {load_before}, after {load_after}\n")
    print("| framework | median ms | x jeeves_router (stream) |")
    print("|---|---|---|")
    for name, ms in sorted(medians.items(), key=lambda kv: kv[1]):
        print(f"| {name} | {ms:.4f} | {ms / ours:.1f} |")
    print(f"\njeeves_router (stream) / fastest peer = {ours / fastest_peer:.3f} (goal <= 0.05)")
    run_ratio = medians["jeeves_router (run)"] / fastest_peer
    print(f"jeeves_router (run) / fastest peer = {run_ratio:.3f} (goal: lower than the stream's)")


async def otel(n: int) -> None:
    """OpenTelemetry absent vs imported-but-unconfigured vs configured, same run, alternating blocks."""
    import os

    import opentelemetry.trace as otel_trace
    from opentelemetry.sdk.trace import TracerProvider

    api = sys.modules["opentelemetry.trace"]
    sdk_provider = TracerProvider()  # spans are built and ended; no processor exports them

    def state(imported: bool, provider: object) -> None:
        # every contender pays for the same two assignments before its request
        if imported:
            sys.modules["opentelemetry.trace"] = api
        else:
            sys.modules.pop("opentelemetry.trace", None)
        otel_trace._TRACER_PROVIDER = provider  # type: ignore[attr-defined]

    async def absent(text: str) -> str:
        state(False, None)
        return await jeeves_router_routed(text)

    async def unconfigured(text: str) -> str:
        state(True, None)
        return await jeeves_router_routed(text)

    async def configured(text: str) -> str:
        state(True, sdk_provider)
        return await jeeves_router_routed(text)

    contenders = {"otel absent": absent, "otel imported, no provider": unconfigured, "otel SDK provider": configured}
    # Short blocks (load drifts on a shared machine), and the contenders' order reversed for the
    # second half, so that whatever the order does (caches, GC debt) falls on every contender alike.
    forward = await measure_all(contenders, n // 2, rounds=25)
    backward = await measure_all(dict(reversed(list(contenders.items()))), n // 2, rounds=25)
    medians = {name: (forward[name] + backward[name]) / 2 for name in contenders}
    checks = await _checks_per_request()
    per_check = {imported: _check_ns(imported, api) for imported in (False, True)}
    state(True, None)
    base = medians["otel absent"]
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"OpenTelemetry hooks on one routed request, streamed (n={n}, alternating blocks, load average {load})\n")
    print("| OpenTelemetry | median ms | x absent |")
    print("|---|---|---|")
    for name, ms in medians.items():
        print(f"| {name} | {ms:.4f} | {ms / base:.3f} |")
    ratio = medians["otel imported, no provider"] / base
    print(f"\nunconfigured / absent = {ratio:.3f} (goal <= 1.05: {'met' if ratio <= 1.05 else 'NOT met'})")
    print(
        f"the hooks ask active_tracer() {checks} times per request: {per_check[False]:.0f} ns each when OpenTelemetry "
        f"is absent, {per_check[True]:.0f} ns when imported without a provider, i.e. "
        f"{checks * per_check[True] / (base * 1e6):.2%} of the absent median"
    )


async def _checks_per_request() -> int:
    """How often one request asks whether tracing is on (counted, not assumed)."""
    import jeeves_router.tracing as tracing

    calls = 0
    real = tracing.active_tracer

    def counting() -> object:
        nonlocal calls
        calls += 1
        return real()

    tracing.active_tracer = counting  # type: ignore[assignment]
    try:
        await jeeves_router_routed("count")
    finally:
        tracing.active_tracer = real
    return calls


def _check_ns(imported: bool, api: object) -> float:
    """Nanoseconds per active_tracer() call (median of 7 timeit repeats of 100k calls)."""
    import statistics
    import timeit

    from jeeves_router.tracing import active_tracer

    if imported:
        sys.modules["opentelemetry.trace"] = api  # type: ignore[assignment]
    else:
        sys.modules.pop("opentelemetry.trace", None)
    try:
        return statistics.median(timeit.repeat(active_tracer, number=100_000, repeat=7)) / 100_000 * 1e9
    finally:
        sys.modules["opentelemetry.trace"] = api  # type: ignore[assignment]


if __name__ == "__main__":
    from _cli import bench_args

    opts = bench_args(__doc__, flags={"--otel": "measure the OpenTelemetry hooks instead of the peers"})
    asyncio.run(otel(opts.n) if opts.otel else main(opts.n))
