"""One desk per architecture for the stream seams tests, and a check that nothing was left behind (not a test module).

Every desk routes "refund INV-7" to ``billing``, which streams two chunks while it calls its
``lookup`` tool, then hands off to ``general``, which streams "Refund done.": a run with text,
a tool and a handoff under a Router with an LLM classifier, one with the embedded classifier
(hashing encoder), a cascade, a HandoffRouter and Capabilities.
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import sys
import warnings
from collections.abc import Iterator
from typing import Any

import anyio
import anyio.lowlevel

from jeeves_router import Agent, Router, RouterRoute, ToolContext, tool
from jeeves_router.architectures.capabilities.architecture import Capabilities, Capability
from jeeves_router.architectures.router import HandoffRouter
from jeeves_router.classify.cascade import CascadeClassifier
from jeeves_router.classify.embedding import EmbeddingClassifier, HashingEncoder
from jeeves_router.classify.types import RouteSpec
from jeeves_router.models.base import ModelRequest
from jeeves_router.testing import Call, Chunks, FunctionModel, Reply, ScriptedModel, StaticClassifier

SPECS = (
    RouteSpec("billing", "payments, invoices, refunds", ("I was charged twice", "refund my payment", "wrong invoice")),
    RouteSpec("general", "anything else", ("hello there", "who are you")),
)


class Team:
    """billing streams, looks INV-7 up, hands off to general, which streams the answer.

    ``gate``: every lookup waits for it; ``gates``: a lookup of a session (by its root id)
    waits for that session's gate. ``tool_started`` / ``started[root]`` are set as a lookup begins.
    """

    def __init__(self, gate: anyio.Event | None = None, gates: dict[str, anyio.Event] | None = None) -> None:
        self.lookups: list[str] = []
        self.tool_started = anyio.Event()
        self.started: dict[str, anyio.Event] = {k: anyio.Event() for k in gates or {}}
        self.gate = gate
        self.gates = gates or {}

        @tool
        async def lookup(ctx: ToolContext, invoice: str) -> str:
            """Look an invoice up."""
            root = ctx.session_id.split("__")[0]
            self.lookups.append(f"{root}:{invoice}")
            self.tool_started.set()
            if root in self.started:
                self.started[root].set()
            if self.gate is not None:
                await self.gate.wait()
            if root in self.gates:
                await self.gates[root].wait()
            return "paid twice"

        def billing_answer(request: ModelRequest) -> Reply:
            roles = [m.role for m in request.messages]
            if "tool" not in roles:
                return Reply(text=Chunks("Checking ", "INV-7. "), calls=[Call("lookup", {"invoice": "INV-7"})])
            return Reply(calls=[Call("transfer_to_general", {"reason": "refunds are general's"})])

        self.billing_model = FunctionModel(billing_answer, name="billing")
        self.general_model = FunctionModel(lambda r: Reply(text=Chunks("Refund ", "done.")), name="general")
        # every model of the desk (build adds the router's or orchestrator's): what sent() counts
        self.models: list[FunctionModel | ScriptedModel] = [self.billing_model, self.general_model]
        self.general = Agent("General.", name="general", model=self.general_model)
        self.billing = Agent(
            "Billing.", name="billing", model=self.billing_model, tools=[lookup], handoffs=[self.general]
        )

    def sent(self) -> int:
        """The model requests sent so far by every model of the desk."""
        return sum(len(m.requests) for m in self.models)

    def routes(self) -> list[RouterRoute]:
        return [RouterRoute("billing", self.billing, "payments"), RouterRoute("general", self.general, "else")]


def build(arch: str, team: Team, **agent_kw: Any) -> Agent:
    """The desk of architecture ``arch`` (one of :data:`ARCHS`) in front of ``team``."""
    if arch == "router-llm":
        classifier = ScriptedModel(["route: billing\nconfidence: 0.9"] * 4)
        team.models.append(classifier)
        return Agent("Desk", name="desk", model=classifier, architecture=Router(team.routes()), **agent_kw)
    if arch == "router-embedding":
        clf = EmbeddingClassifier(SPECS, encoder=HashingEncoder())
        return Agent(
            "Desk",
            name="desk",
            architecture=Router(team.routes(), classifier=clf, fallback_route="billing"),
            **agent_kw,
        )
    if arch == "cascade":
        clf = CascadeClassifier(EmbeddingClassifier(SPECS, encoder=HashingEncoder()), StaticClassifier("billing", 0.9))
        return Agent("Desk", name="desk", architecture=Router(team.routes(), classifier=clf), **agent_kw)
    if arch == "handoff-router":
        router_model = ScriptedModel([Call("classify_as_billing", {"reason": "money", "confidence": 0.9})] * 4)
        team.models.append(router_model)
        return Agent("Desk", name="desk", model=router_model, architecture=HandoffRouter(team.routes()), **agent_kw)
    if arch == "capabilities":

        def brain(request: ModelRequest) -> str:
            system = request.system or ""
            if system.startswith("You decide whether"):
                return "yes"
            if system.startswith("You plan"):
                return json.dumps({"steps": [{"capability": "billing", "task": "refund INV-7"}]})
            return "refund INV-7"

        caps = [Capability("billing", team.billing, "payments")]
        orchestrator = FunctionModel(brain, name="brain")
        team.models.append(orchestrator)
        return Agent("Orchestrator", name="desk", model=orchestrator, architecture=Capabilities(caps), **agent_kw)
    raise AssertionError(arch)


ARCHS = ["router-llm", "router-embedding", "cascade", "handoff-router", "capabilities"]


@contextlib.contextmanager
def nothing_left_behind() -> Iterator[list[str]]:
    """A window whose warnings, unraisable exceptions and asyncio error logs ("Task was destroyed") are recorded.

    Yields the list they are added to as the window closes, after one ``gc.collect()`` that
    finalises what the window's code left (a dropped stream, an unclosed coroutine); assert it
    is empty. Take the reading of earlier tasks first (:func:`~tests.task_helpers.settled_tasks`,
    which collects earlier tests' garbage), so that only this window's garbage is judged.
    """
    problems: list[str] = []
    old_hook = sys.unraisablehook

    def hook(u: Any) -> None:
        problems.append(f"unraisable: {u.exc_type.__name__}: {u.exc_value} in {u.object!r}")

    class Catch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            problems.append(f"asyncio log: {record.getMessage()}")

    handler = Catch(level=logging.ERROR)
    logger = logging.getLogger("asyncio")
    logger.addHandler(handler)
    sys.unraisablehook = hook
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield problems
            gc.collect()
        problems.extend(f"warning: {w.category.__name__}: {w.message}" for w in caught)
    finally:
        sys.unraisablehook = old_hook
        logger.removeHandler(handler)


async def quiet_loop() -> None:
    """Let the loop run a few turns (a dropped stream's close is a task of its own)."""
    for _ in range(5):
        await anyio.lowlevel.checkpoint()
