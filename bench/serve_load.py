"""Load on the served router: N concurrent streamed chat completions over loopback.

Two servers, each in its own process under uvicorn on 127.0.0.1, answer the same streamed
text in the same chunks, as OpenAI ``chat.completion.chunk`` server-sent events:

- ``floor``: a bare Starlette endpoint that waits 20 ms twice (the classifier's and the
  specialist's latency) and streams the text: the least any server can do;
- ``router``: ``examples/serve_desk.py``'s desk (a router classifying with a fake model,
  then a fake specialist streaming; both 20 ms) behind ``create_app``;
- ``router+sqlite`` (with ``--journal``): the same, journaling every run to SQLite.

For each, all N requests are started at once and each is read to ``[DONE]``. Printed:
errors, lost or duplicated chunks (against the expected chunk list), p50/p99 latency and
the p50/p99 added over the floor, requests per second, and the server's peak RSS. Rounds
alternate the servers; every batch is bounded by a timeout.

    PYTHONPATH=. python bench/serve_load.py [-n 1000] [--rounds 2] [--journal]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import httpx2 as httpx

ROOT = Path(__file__).resolve().parents[1]
EXPECTED = ["[billing] ", "Happy to help ", "(I see 0 earlier messages)."]
LATENCY_S = 0.02


# -- servers (run in a child process) ------------------------------------------------------


def floor_app() -> object:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    async def chat(request: Request) -> StreamingResponse:
        await request.json()

        async def body():  # type: ignore[no-untyped-def]
            await asyncio.sleep(LATENCY_S)  # the classifier's call
            await asyncio.sleep(LATENCY_S)  # the specialist's call
            base = {"id": "chatcmpl-floor", "object": "chat.completion.chunk", "created": 0, "model": "desk"}
            yield _sse({**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
            for text in EXPECTED:
                yield _sse({**base, "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]})
            yield _sse({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
            yield b"data: [DONE]\n\n"

        return StreamingResponse(body(), media_type="text/event-stream")

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])


def _sse(payload: dict[str, object]) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


def router_app(journal: str | None) -> object:
    from examples.serve_desk import build_desk
    from jeeves_router.serve import create_app

    return create_app(build_desk(LATENCY_S), journal=journal, max_concurrency=4096)


def quiet_logs() -> None:
    import logging

    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


def run_server(kind: str, port: int, journal: str | None) -> None:
    import uvicorn

    quiet_logs()
    app = floor_app() if kind == "floor" else router_app(journal)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False, backlog=4096)


# -- client ----------------------------------------------------------------------------------


@dataclass
class Batch:
    kind: str
    latencies: list[float]
    errors: int
    lost: int
    duplicated: int
    wall_s: float
    peak_rss_mb: float

    def pct(self, q: float) -> float:
        xs = sorted(self.latencies)
        return xs[min(len(xs) - 1, int(q * len(xs)))] * 1000 if xs else float("nan")


async def one(port: int, start: asyncio.Event, i: int) -> tuple[float | None, list[str]]:
    """One streamed request on its own connection, over a minimal HTTP/1.1 client.

    The client is kept as light as possible (raw asyncio streams, chunked decoding, SSE
    lines) so that the figures measure the servers, not the client.
    """
    payload = json.dumps(
        {"model": "desk", "messages": [{"role": "user", "content": f"refund for invoice {i}"}], "stream": True}
    ).encode()
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(payload)}\r\nconnection: close\r\n\r\n"
    ).encode()
    await start.wait()
    t = time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    got: list[str] = []
    try:
        writer.write(head + payload)
        status = await reader.readline()
        if b" 200 " not in status:
            return None, got
        while (await reader.readline()) not in (b"\r\n", b""):
            pass
        buffer = b""
        while True:
            size = int((await reader.readline()).strip() or b"0", 16)
            if size == 0:
                return None, got  # ended without [DONE]
            buffer += await reader.readexactly(size)
            await reader.readexactly(2)
            *events, buffer = buffer.split(b"\n\n")
            for ev in events:
                if ev == b"data: [DONE]":
                    return time.perf_counter() - t, got
                if ev.startswith(b"data: "):
                    for choice in json.loads(ev[6:]).get("choices", ()):
                        if choice["delta"].get("content"):
                            got.append(choice["delta"]["content"])
    finally:
        writer.close()


async def batch(port: int, n: int, timeout_s: float) -> tuple[list[float], int, int, int, float]:
    start = asyncio.Event()
    tasks = [asyncio.create_task(one(port, start, i)) for i in range(n)]
    await asyncio.sleep(0.2)  # let every task reach the start line
    t0 = time.perf_counter()
    start.set()
    done, pending = await asyncio.wait(tasks, timeout=timeout_s)
    wall = time.perf_counter() - t0
    for task in pending:
        task.cancel()
    latencies: list[float] = []
    errors = len(pending)
    lost = duplicated = 0
    want = Counter(EXPECTED)
    for task in done:
        if task.exception() is not None:
            errors += 1
            continue
        latency, got = task.result()
        have = Counter(got)
        lost += sum((want - have).values())
        duplicated += sum((have - want).values())
        if latency is None:
            errors += 1
        else:
            latencies.append(latency)
    return latencies, errors, lost, duplicated, wall


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def start_server(kind: str, port: int, journal: str | None) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, __file__, "--serve", kind, "--port", str(port)]
    if journal is not None:
        cmd += ["--journal-file", journal]
    return subprocess.Popen(cmd, env={**os.environ, "PYTHONPATH": str(ROOT)})


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    proc.wait(30)


async def measure(kind: str, n: int, timeout_s: float, journal: str | None) -> Batch:
    port = free_port()
    proc = start_server(kind, port, journal)
    url = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(base_url=url) as probe:
            for _ in range(400):
                try:
                    await probe.post("/v1/chat/completions", json={"model": "desk", "messages": []})
                    break
                except httpx.TransportError:
                    await asyncio.sleep(0.05)
            else:
                raise RuntimeError(f"{kind} server did not start")
        # warm up (imports, first-request paths), then the measured batch
        await batch(port, 20, timeout_s)
        latencies, errors, lost, dup, wall = await batch(port, n, timeout_s)
        return Batch(kind, latencies, errors, lost, dup, wall, peak_rss_mb(proc.pid))
    finally:
        stop_server(proc)


async def asgi_call(app: object, body: bytes) -> None:
    """One request straight into the ASGI app (no socket, no HTTP parsing)."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/chat/completions",
        "raw_path": b"/v1/chat/completions",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 2),
    }
    delivered = False
    done = asyncio.Event()

    async def receive() -> dict[str, object]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, object]) -> None:
        pass

    await app(scope, receive, send)  # type: ignore[operator]
    done.set()


async def cpu_per_request(n: int = 300, blocks: int = 5) -> dict[str, float]:
    """CPU milliseconds per request of each app called in-process, models answering at once."""
    global LATENCY_S
    quiet_logs()
    saved, LATENCY_S = LATENCY_S, 0.0
    try:
        tmp = Path(tempfile.mkdtemp())
        apps = {"floor": floor_app(), "router": router_app(None), "router+sqlite": router_app(str(tmp / "cpu.db"))}
        body = json.dumps(
            {"model": "desk", "messages": [{"role": "user", "content": "refund for invoice 1"}], "stream": True}
        ).encode()
        samples: dict[str, list[float]] = {k: [] for k in apps}
        for _ in range(blocks):
            for kind, app in apps.items():
                t = time.process_time()
                for _ in range(n):
                    await asgi_call(app, body)
                samples[kind].append((time.process_time() - t) / n * 1000)
        return {k: statistics.median(v) for k, v in samples.items()}
    finally:
        LATENCY_S = saved


def report(batches: list[Batch], kinds: list[str]) -> None:
    """Each batch, then the medians over rounds of what each server adds to its round's floor."""
    print(f"{'round':<6}{'server':<14}{'errors':>7}{'lost':>6}{'dup':>5}{'p50 ms':>9}{'p99 ms':>9}", end="")
    print(f"{'+p50 ms':>9}{'+p99 ms':>9}{'req/s':>8}{'peak RSS MB':>13}")
    added: dict[str, list[tuple[float, float, float]]] = {k: [] for k in kinds}
    for i in range(0, len(batches), len(kinds)):
        floor = batches[i]
        for b in batches[i : i + len(kinds)]:
            a50, a99 = b.pct(0.5) - floor.pct(0.5), b.pct(0.99) - floor.pct(0.99)
            rate = len(b.latencies) / b.wall_s
            added[b.kind].append((a50, a99, rate / (len(floor.latencies) / floor.wall_s)))
            print(
                f"{i // len(kinds) + 1:<6}{b.kind:<14}{b.errors:>7}{b.lost:>6}{b.duplicated:>5}{b.pct(0.5):>9.1f}"
                f"{b.pct(0.99):>9.1f}{a50:>9.1f}{a99:>9.1f}{rate:>8.0f}{b.peak_rss_mb:>13.1f}"
            )
    print("medians over rounds (added over the same round's floor):")
    for kind in kinds[1:]:
        a50s, a99s, ratios = zip(*added[kind], strict=True)
        print(
            f"  {kind:<14} +p50 {statistics.median(a50s):7.1f} ms   +p99 {statistics.median(a99s):7.1f} ms   "
            f"throughput x{statistics.median(ratios):.2f} of the floor"
        )


async def main(n: int, rounds: int, timeout_s: float, with_journal: bool) -> None:
    kinds = ["floor", "router"] + (["router+sqlite"] if with_journal else [])
    tmp = Path(tempfile.mkdtemp())
    batches: list[Batch] = []
    for r in range(rounds):
        for kind in kinds:
            journal = str(tmp / f"runs-{r}.db") if kind == "router+sqlite" else None
            batches.append(await measure(kind, n, timeout_s, journal))
    print(f"{n} concurrent streamed requests per batch, {rounds} round(s), fake models {LATENCY_S * 1000:.0f} ms")
    print(f"load average before/after: {LOAD_BEFORE} / {os.getloadavg()}")
    report(batches, kinds)
    cpu = await cpu_per_request()
    print("CPU per request in-process (ASGI call, no socket, models answer at once; median of 5 blocks of 300):")
    print("  " + "   ".join(f"{k} {v:.3f} ms" for k, v in cpu.items()))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Load on the served router vs a bare Starlette floor.")
    parser.add_argument("-n", type=int, default=1000, help="concurrent requests per batch")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=120.0, help="bound on each batch, seconds")
    parser.add_argument("--journal", action="store_true", help="also measure the router journaling to SQLite")
    parser.add_argument("--serve", choices=["floor", "router", "router+sqlite"], help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--journal-file", help=argparse.SUPPRESS)
    args = parser.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if args.serve:
        run_server(args.serve, args.port, args.journal_file)
    else:
        LOAD_BEFORE = os.getloadavg()
        asyncio.run(main(args.n, args.rounds, args.timeout, args.journal))
