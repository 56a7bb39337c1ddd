"""Shared builders for the journal and DBOS tests (not a test module).

The models here are deterministic functions of the request, so a process that resumes a
run builds exactly the same agent as the one that crashed. Every model call and tool call
is appended to a counter file (``start <label>`` / ``done <label>``), so tests can count
calls across processes.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Collection, Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel

from jeeves_router import Agent
from jeeves_router.architectures.router.router import Router, RouterRoute
from jeeves_router.events import Event, event_adapter
from jeeves_router.journal.base import Journal
from jeeves_router.journal.records import Entry
from jeeves_router.messages import TextPart, ToolCallPart
from jeeves_router.models.base import ModelRequest, ModelResponse, ModelStreamItem, ModelTextDelta
from jeeves_router.runtime import Runtime
from jeeves_router.tools import Tool, tool
from jeeves_router.usage import Usage

PROMPT = "I was charged twice for invoice INV-7"


def log_line(path: Path | None, line: str) -> None:
    """Append one line to the counter file (O_APPEND: whole lines, even across processes)."""
    if path is None:
        return
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def read_counts(path: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            counts[line] = counts.get(line, 0) + 1
    return counts


class DeskModel:
    """Classifier + specialist in one deterministic model.

    ``request`` (the classifier) answers billing unless the text says "hello";
    ``stream`` (the specialist) calls ``lookup_invoice`` first, then answers in chunks.
    With ``hang_at`` set to a label, that call stops after its first chunk (and touches
    ``marker``) so a test can kill the process mid-call.
    """

    def __init__(
        self,
        tag: str = "",
        *,
        counter: Path | None = None,
        hang_at: str | None = None,
        marker: Path | None = None,
        delay: float = 0.0,
    ) -> None:
        self.tag = tag
        self.delay = delay
        self.counter = counter
        self.hang_at = hang_at
        self.marker = marker
        self.calls: list[str] = []

    @property
    def name(self) -> str:
        return "test:desk"

    def _label(self, request: ModelRequest) -> str:
        first = request.messages[0].text
        key = first.split()[-1] if first else "?"
        turn = sum(1 for m in request.messages if m.role == "assistant") + 1
        return f"{self.tag}{key}:{turn}"

    async def request(self, request: ModelRequest) -> ModelResponse:
        text = request.messages[-1].text
        label = f"{self.tag}classify:{text.split()[-1] if text else '?'}"
        self.calls.append(label)
        log_line(self.counter, f"start {label}")
        route = "general" if "hello" in text.lower() else "billing"
        log_line(self.counter, f"done {label}")
        return ModelResponse((TextPart(f"route: {route}\nconfidence: 0.9"),), Usage(12, 4, 0, 1, 0.0), "end", "desk")

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        label = self._label(request)
        self.calls.append(label)
        log_line(self.counter, f"start {label}")
        if self.delay:
            await anyio.sleep(self.delay)
        last = request.messages[-1]
        if last.role == "user" and request.tools:
            inv = last.text.split()[-1]
            await anyio.lowlevel.checkpoint()
            if self.hang_at == label:
                await self._hang()
            log_line(self.counter, f"done {label}")
            yield ModelResponse(
                (ToolCallPart(f"call-{inv}", "lookup_invoice", {"invoice": inv}),),
                Usage(20, 6, 0, 1, 0.0),
                "tool_calls",
                "desk",
            )
            return
        detail = last.parts[0].content if last.role == "tool" else last.text  # type: ignore[union-attr]
        chunks = ["Refund ", "issued: ", f"{detail}."]
        for i, ch in enumerate(chunks):
            yield ModelTextDelta(ch)
            if i == 0 and self.hang_at == label:
                await self._hang()
        log_line(self.counter, f"done {label}")
        yield ModelResponse((TextPart("".join(chunks)),), Usage(30, 8, 0, 1, 0.0), "end", "desk")

    async def _hang(self) -> None:
        if self.marker is not None:
            self.marker.write_text("hanging")
        await anyio.sleep_forever()


def lookup_tool(counter: Path | None = None, *, hang: Path | None = None) -> Tool:
    """The desk's one tool; with ``hang`` set, each call touches that file and never returns (kill it there)."""

    @tool
    async def lookup_invoice(invoice: str) -> str:
        """Look up an invoice's payments."""
        log_line(counter, f"tool {invoice}")
        if hang is not None:
            await anyio.Path(hang).write_text("hanging")
            await anyio.sleep_forever()
        return f"{invoice} was paid twice"

    return lookup_invoice


def build_desk(runtime: Runtime | None, model: Any, *, counter: Path | None = None, tool: Tool | None = None) -> Agent:
    billing = Agent(
        "You resolve payments.", name="billing", model=model, tools=[tool or lookup_tool(counter)], runtime=runtime
    )
    general = Agent("You answer everything else.", name="general", model=model, runtime=runtime)
    return Agent(
        "Support desk",
        name="desk",
        model=model,
        runtime=runtime,
        architecture=Router(
            [RouterRoute("billing", billing, "payments"), RouterRoute("general", general, "other")],
            fallback_route="general",
        ),
    )


def strip_ts(events: list[Event]) -> list[dict[str, Any]]:
    """Events as JSON without their timestamps (what must match between runs)."""
    adapter = event_adapter()
    out = []
    for ev in events:
        data = adapter.dump_python(ev, mode="json")
        data.pop("ts")
        out.append(data)
    return out


class Wrapped:
    """A journal that passes everything to ``journal``; subclasses change ``append``."""

    def __init__(self, journal: Journal) -> None:
        self.journal = journal

    async def append(self, entries: Sequence[Entry]) -> None:
        await self.journal.append(entries)

    async def read(
        self, session_id: str, *, run_id: str | None = None, types: Collection[str] | None = None
    ) -> list[Entry]:
        return await self.journal.read(session_id, run_id=run_id, types=types)

    async def sessions(self) -> list[str]:
        return await self.journal.sessions()

    async def aclose(self) -> None:
        await self.journal.aclose()


async def run_then_fork_at_lookup(durable: Any) -> tuple[str, Any]:
    """Launch DBOS, run the desk's ``PROMPT`` as workflow ``wf-1`` to its answer, then fork it from its
    ``lookup_invoice`` call (the state a worker killed mid-call leaves); the workflow's id and the fork's result."""
    from dbos import DBOS

    DBOS.launch()
    await durable.register_queue(polling_interval_sec=0.1)
    wid = await durable.enqueue(PROMPT, session_id="q1", workflow_id="wf-1")
    assert (await durable.result(wid)).output == "Refund issued: INV-7 was paid twice."
    steps = await DBOS.list_workflow_steps_async(wid)
    call = next(s["function_id"] for s in steps if s["function_name"] == "tool:lookup_invoice")
    forked = await DBOS.fork_workflow_async(wid, call)
    return wid, await durable.result(forked.workflow_id)
