"""Shared pieces of the server tests (not a test module): fake desks and a uvicorn thread.

The desks are built from stateless fake models, so many requests may run at once. The
subprocess SIGTERM test imports ``slow_desk`` and ``stuck_desk`` by ``module:attr``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import anyio
import anyio.lowlevel
import uvicorn

from examples.serve_desk import build_desk, classify
from jeeves_router import Agent, Recovery, Router, RouterRoute
from jeeves_router.messages import TextPart
from jeeves_router.models.base import ModelRequest, ModelResponse, ModelStreamItem, ModelTextDelta
from jeeves_router.testing import FunctionModel

__all__ = [
    "FLOOD",
    "Flood",
    "GatedModel",
    "ServerThread",
    "build_desk",
    "desk_with",
    "flood_desk",
    "running",
    "served_by_cli",
    "slow_desk",
    "stuck_desk",
]

SLOW_CHUNKS = tuple(f"part{i} " for i in range(8))


class GatedModel:
    """Streams ``first`` then waits (cancellably) until ``gate`` is set, then streams ``rest``.

    ``cancelled`` is set when the stream is closed before it finished.
    """

    def __init__(self, first: str = "first ", rest: tuple[str, ...] = ("rest.",), *, step_s: float = 0.0) -> None:
        self.first, self.rest, self.step_s = first, rest, step_s
        self.gate = threading.Event()
        self.started = threading.Event()
        self.cancelled = threading.Event()
        self.finished = threading.Event()

    @property
    def name(self) -> str:
        return "test:gated"

    async def request(self, request: ModelRequest) -> ModelResponse:
        raise NotImplementedError

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        done = False
        try:
            self.started.set()
            yield ModelTextDelta(self.first)
            while not self.gate.is_set():  # noqa: ASYNC110 - set from the test's thread, not this loop's
                await anyio.sleep(0.01)
            for piece in self.rest:
                if self.step_s:
                    await anyio.sleep(self.step_s)
                yield ModelTextDelta(piece)
            yield ModelResponse((TextPart(self.first + "".join(self.rest)),))
            done = True
            self.finished.set()
        finally:
            if not done:
                self.cancelled.set()


class Flood:
    """Streams 8 KiB text deltas until ``stop`` is set, then answers with their text.

    ``cut`` is set when the stream is closed before it finished, ``finished`` when it finished.
    """

    name = "test:flood"

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.cut = threading.Event()
        self.finished = threading.Event()

    async def request(self, request: ModelRequest) -> ModelResponse:  # pragma: no cover - streamed only
        raise NotImplementedError

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        pieces = 0
        try:
            while not self.stop.is_set():
                yield ModelTextDelta("x" * 8192)
                pieces += 1
                await anyio.lowlevel.checkpoint()
            yield ModelResponse((TextPart("x" * 8192 * pieces),))
            self.finished.set()
        finally:
            if not self.finished.is_set():
                self.cut.set()


def desk_with(
    specialist: Any, *, name: str = "desk", handoffs: Sequence[Agent] = (), recovery: Recovery | None = None
) -> Agent:
    """A router whose keyword classifier sends everything billing-like to ``specialist``.

    ``handoffs``: agents the billing specialist may hand the turn to; ``recovery``: the router's.
    """
    billing = Agent("You handle billing.", name="billing", model=specialist, handoffs=list(handoffs))
    general = Agent("You handle the rest.", name="general", model=FunctionModel(lambda r: "general answer"))
    return Agent(
        "desk",
        name=name,
        model=FunctionModel(classify, name="classifier"),
        architecture=Router(
            routes=[RouterRoute("billing", billing, "payments"), RouterRoute("general", general, "the rest")],
            fallback_route="general",
            require_confidence_above=0.6,
            recovery=recovery,
        ),
    )


def _slow() -> Agent:
    gate = GatedModel("part-first ", SLOW_CHUNKS, step_s=0.05)
    gate.gate.set()
    return desk_with(gate)


def _stuck() -> Agent:
    return desk_with(GatedModel("stuck-first "))


slow_desk = _slow()
stuck_desk = _stuck()
#: A desk whose billing specialist streams without end (its model: ``FLOOD``), for one test.
FLOOD = Flood()
flood_desk = desk_with(FLOOD)


class ServerThread:
    """uvicorn serving ``app`` on 127.0.0.1 (a free port) in a thread with its own event loop."""

    def __init__(self, app: Any) -> None:
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on", access_log=False)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.thread.start()
        for _ in range(1000):
            if self.server.started:
                break
            self.thread.join(0.01)
        assert self.server.started, "uvicorn did not start"
        self.port = self.server.servers[0].sockets[0].getsockname()[1]

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)
        assert not self.thread.is_alive()


@contextmanager
def running(app: Any) -> Iterator[ServerThread]:
    """Serve ``app`` for the ``with`` block."""
    server = ServerThread(app)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def subprocess_env() -> dict[str, str]:
    """The environment of a server subprocess: the repo on the path, warnings as errors, no keys."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    env["PYTHONPATH"] = root
    env["JEEVES_BLOCK_REAL_MODELS"] = "1"
    return env


def served_by_cli(monkeypatch: Any, args: Sequence[str]) -> Any:
    """The ASGI app ``jeeves-router serve ARGS`` builds, taken from it before uvicorn would listen.

    Without ``--port`` in ARGS it is given ``--port 0``: the command checks that it can listen
    before it builds the app, and 8000, its default, may be taken on the machine.
    """
    from typer.testing import CliRunner

    from jeeves_router.cli import app as cli

    served: list[Any] = []

    class Stop(BaseException):  # past the command's one-line error handler
        pass

    def config(asgi: Any, **options: Any) -> None:
        served.append(asgi)
        raise Stop

    monkeypatch.setattr(uvicorn, "Config", config)
    try:
        CliRunner().invoke(cli, ["serve", *args, *([] if "--port" in args else ["--port", "0"])])
    except Stop:
        pass
    finally:
        monkeypatch.undo()
    assert len(served) == 1, f"jeeves-router serve {' '.join(args)} built no app"
    return served[0]
