"""A recorded session as a tree of timed steps, read from a journal (for the trace page).

:func:`load_trace` reads a session and the child sessions its routes ran under
(``{session}__route_{name}``, ...) and rebuilds each run as a tree: agent runs (nested by
route path), the routing decision (with the classifier's score for every route when it
ranked them), model calls (tokens and cost), tool calls and results, and the notes that
explain a run — fallbacks, retries, recovery, handoffs, restarted streams.

Times come from the recorded events (``ts``) and entries. A model call's entry is written
when the call ends; its start is taken as the end of the step before it in the same agent
run, so its duration is an upper bound.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import UsageError
from ..events import (
    CapabilityCompleted,
    CapabilityStarted,
    Event,
    RouterClassified,
    RouterCompleted,
    RouterFallback,
    RunCompleted,
    RunFailed,
    RunStarted,
    TextDelta,
    ToolCalled,
    ToolResult,
    event_adapter,
)
from .base import Journal
from .records import EventRecord, ModelRecord, RunEndRecord, RunStartRecord, StepRecord
from .resume import RecordedRuns

__all__ = ["RunTrace", "SessionTrace", "TraceNode", "load_trace"]

NodeKind = Literal["run", "model", "tool", "decision", "capability", "note"]


@dataclass(slots=True)
class TraceNode:
    """One step of a run: an agent run, a model call, a tool call, the decision or a note.

    ``end`` equals ``start`` for instant notes; ``data`` holds the step's details
    (tokens and cost, tool arguments and result, route scores, ...).
    """

    kind: NodeKind
    label: str
    start: float
    end: float
    path: tuple[str, ...] = ()
    status: str = "ok"
    data: dict[str, Any] = field(default_factory=dict)
    children: list[TraceNode] = field(default_factory=list)

    @property
    def duration_s(self) -> float:
        """``end - start`` (0 for notes)."""
        return max(0.0, self.end - self.start)

    def walk(self) -> list[tuple[int, TraceNode]]:
        """This node and its descendants, depth first, with their depth."""
        out: list[tuple[int, TraceNode]] = []
        stack: list[tuple[int, TraceNode]] = [(0, self)]
        while stack:
            depth, node = stack.pop()
            out.append((depth, node))
            stack.extend((depth + 1, c) for c in reversed(node.children))
        return out


@dataclass(slots=True)
class RunTrace:
    """One run (turn) of the session: its prompt, outcome, step tree and totals per route.

    ``status`` is the root result's status (``ok``, ``fallback``, ``critical``, ...), else
    ``failed`` (it raised), ``cut`` (its attempt was cut off) or ``running`` (not ended).
    """

    run_id: str
    attempt: int
    prompt: str
    root: TraceNode
    status: str
    usage: dict[str, Any]
    usage_by_route: dict[str, dict[str, Any]]
    decisions: list[dict[str, Any]]


@dataclass(slots=True)
class SessionTrace:
    """Every run of one session."""

    session_id: str
    runs: list[RunTrace]


async def load_trace(journal: Journal, session_id: str) -> SessionTrace:
    """The runs of ``session_id`` (and of its child sessions) rebuilt from ``journal``.

    Each run is shown by its last completed attempt, else its latest one
    (:meth:`.resume.RecordedRuns.telling`). A run whose attempt ended ``cut`` (cancelled, e.g.
    by its server's shutdown, or its stream closed early) has status ``cut``, and so has every
    step it left open (a ``failed`` run's open steps are ``failed``); a run with no
    ``run.end`` yet (in flight, in this or another process) is ``running``. A run with no
    recorded events (in flight, or cut off before its first step was written) is shown with
    its prompt only.

    Raises:
        UsageError: if the session has no recorded run, or a run that ended has no
            recorded events (the runtime was created with ``record_events=False``).
    """
    root_entries = await journal.read(session_id)
    starts = [e for e in root_entries if isinstance(e.record, RunStartRecord)]
    if not starts:
        raise UsageError(f"session {session_id!r} has no recorded run in {journal!r}")
    children = [s for s in await journal.sessions() if s.startswith(f"{session_id}__")]
    entries = list(root_entries)
    for child in children:
        entries.extend(await journal.read(child, types=("model", "step")))
    runs: list[RunTrace] = []
    recorded = RecordedRuns.of(root_entries)
    telling: dict[str, RunStartRecord] = {}  # each run's start of the attempt that tells how it went
    for e in starts:
        assert isinstance(e.record, RunStartRecord)
        if e.record.attempt == recorded.telling(e.run_id):
            telling.setdefault(e.run_id, e.record)  # the first of that attempt: a lost claim comes after
    adapter = event_adapter()
    for run_id in recorded.first:
        start = telling[run_id]
        events: list[Event] = [
            adapter.validate_python(e.record.event)
            for e in root_entries
            if e.run_id == run_id and isinstance(e.record, EventRecord) and e.record.attempt == start.attempt
        ]
        mine = [e for e in entries if e.run_id == run_id]
        ends = [e.record for e in mine if isinstance(e.record, RunEndRecord) and e.record.attempt == start.attempt]
        if not events and any(end.status != "cut" for end in ends):
            raise UsageError(
                f"run {run_id!r} of session {session_id!r} has no recorded events; record them with "
                "JournalRuntime(..., record_events=True) (the default)"
            )
        if not events:  # in flight (or cut off) before its first events were written: its prompt only
            ts = max(e.ts for e in starts if e.run_id == run_id)
            events = [
                RunStarted(session_id=session_id, path=(start.agent,), ts=ts, agent=start.agent, prompt=start.prompt)
            ]
        models = [(e.session_id, e.ts, e.record) for e in mine if isinstance(e.record, ModelRecord)]
        steps = [(e.session_id, e.record) for e in mine if isinstance(e.record, StepRecord)]
        runs.append(_build_run(run_id, start, events, models, steps, ends[-1] if ends else None))
    return SessionTrace(session_id, runs)


def _usage(u: Any) -> dict[str, Any]:
    """Usage (a :class:`Usage` or its JSON) as the page shows it."""
    get = u.get if isinstance(u, Mapping) else lambda k, d=None: getattr(u, k, d)
    return {
        "input_tokens": int(get("input_tokens", 0)),
        "output_tokens": int(get("output_tokens", 0)),
        "requests": int(get("requests", 0)),
        "cost_usd": get("cost_usd", 0.0),
    }


def _build_run(
    run_id: str,
    start: RunStartRecord,
    events: list[Event],
    models: list[tuple[str, float, ModelRecord]],
    steps: list[tuple[str, StepRecord]],
    end: RunEndRecord | None,
) -> RunTrace:
    runs: dict[tuple[str, ...], TraceNode] = {}
    open_tools: dict[str, TraceNode] = {}
    open_caps: dict[tuple[tuple[str, ...], str, int], TraceNode] = {}
    by_session: dict[str, list[TraceNode]] = {}
    classify_steps = {
        sid: [s for s_sid, s in steps if s_sid == sid and s.name.startswith("classify")]
        for sid in {s_sid for s_sid, _ in steps}
    }
    root: TraceNode | None = None
    decisions: list[dict[str, Any]] = []
    decided: dict[str, int] = {}  # the index of each session's last decision
    usage_by_route: dict[str, dict[str, Any]] = {}
    usage: dict[str, Any] = _usage({})
    status: str = end.status if end is not None and end.status in ("failed", "cut") else "running"
    adapter = event_adapter()

    def owner(path: tuple[str, ...]) -> TraceNode:
        for n in range(len(path), 0, -1):
            node = runs.get(path[:n])
            if node is not None:
                return node
        assert root is not None
        return root

    for ev in events:
        if isinstance(ev, RunStarted):
            node = TraceNode("run", ev.agent, ev.ts, ev.ts, ev.path, "running", {"session_id": ev.session_id})
            if root is None:
                root = node
            else:
                owner(ev.path[:-1]).children.append(node)
            runs[ev.path] = node
            by_session.setdefault(ev.session_id, []).append(node)
            continue
        if root is None:
            continue
        parent = owner(ev.path)
        parent.end = max(parent.end, ev.ts)
        if isinstance(ev, TextDelta):
            parent.data["output"] = parent.data.get("output", "") + ev.text
        elif isinstance(ev, (RunCompleted, RunFailed)):
            parent.end = ev.ts
            if isinstance(ev, RunCompleted):
                parent.status = ev.result.status
                parent.data["usage"] = _usage(ev.result.usage)
                if ev.result.route is not None:
                    parent.data["route"] = ev.result.route
                if parent is root:
                    status, usage = ev.result.status, _usage(ev.result.usage)
                    usage_by_route = {k: _usage(v) for k, v in ev.result.usage_by_route.items()}
            else:
                parent.status = "failed"
                parent.data["error"] = f"{ev.error_type}: {ev.message}"
        elif isinstance(ev, ToolCalled):
            tool = TraceNode("tool", ev.tool, ev.ts, ev.ts, ev.path, "running", {"arguments": dict(ev.arguments)})
            parent.children.append(tool)
            open_tools[ev.call_id] = tool
        elif isinstance(ev, ToolResult):
            if ev.call_id in open_tools:
                tool = open_tools.pop(ev.call_id)
            else:  # a result without its call (not recorded): show it as an instant step
                tool = TraceNode("tool", ev.tool, ev.ts, ev.ts, ev.path)
                parent.children.append(tool)
            tool.end, tool.status = ev.ts, "error" if ev.is_error else "ok"
            tool.data["result"] = ev.content
            if ev.from_ledger:
                tool.data["from_ledger"] = True
        elif isinstance(ev, RouterClassified):
            # the n-th decision of a router's session is its n-th classify step (a nested router has its own)
            index = decided[ev.session_id] = decided.get(ev.session_id, -1) + 1
            decision = _decision(ev, classify_steps.get(ev.session_id, []), index)
            decisions.append(decision)
            label = f"route → {ev.route} ({ev.confidence:.2f} vs threshold {ev.threshold:g})"
            parent.children.append(TraceNode("decision", label, ev.ts, ev.ts, ev.path, data=decision))
        elif isinstance(ev, RouterCompleted):
            usage_by_route.setdefault(ev.route, _usage(ev.usage))
        elif isinstance(ev, CapabilityStarted):
            cap = TraceNode("capability", ev.capability, ev.ts, ev.ts, ev.path, "running", {"step": ev.step})
            parent.children.append(cap)
            open_caps[(ev.path, ev.capability, ev.step)] = cap
        elif isinstance(ev, CapabilityCompleted):
            key = (ev.path, ev.capability, ev.step)
            if key in open_caps:
                cap = open_caps.pop(key)
            else:  # no start: a step answered from an earlier step's result (not run), or a lost start
                cap = TraceNode(
                    "capability", ev.capability, ev.ts - ev.duration_s, ev.ts, ev.path, data={"step": ev.step}
                )
                parent.children.append(cap)
            cap.end, cap.status = ev.ts, "ok" if ev.ok else "error"
            if ev.answered_from:
                cap.data["answered_from"] = ev.answered_from
            if ev.from_ledger:
                cap.data["from_ledger"] = True
        else:
            if isinstance(ev, RouterFallback) and decisions:
                decisions[-1]["fallback"] = {"route": ev.fallback_route, "reason": ev.reason}
            fields = adapter.dump_python(ev, mode="json")
            for k in ("kind", "session_id", "path", "ts"):
                fields.pop(k, None)
            text = ", ".join(f"{k}={v}" for k, v in fields.items() if v not in (None, "", [], {}))
            parent.children.append(TraceNode("note", ev.kind, ev.ts, ev.ts, ev.path, data={"text": text}))
    if root is None:
        raise UsageError(f"run {run_id!r} has no run.started event in the journal")
    _attach_models(models, by_session, root)
    if status in ("cut", "failed"):  # nothing of an ended attempt runs any more: what it left open ended with it
        for _, node in root.walk():
            if node.status == "running":
                node.status = status
    return RunTrace(run_id, start.attempt, start.prompt, root, status, usage, usage_by_route, decisions)


def _decision(ev: RouterClassified, recorded: list[StepRecord], index: int) -> dict[str, Any]:
    """The decision as shown: the event's fields plus every route's score from the classify step."""
    step = recorded[index] if index < len(recorded) else (recorded[-1] if recorded else None)
    result: Mapping[str, Any] = step.result if step is not None and isinstance(step.result, Mapping) else {}
    scores = [(str(pair[0]), float(pair[1])) for pair in result.get("scores", ()) if len(pair) == 2]
    if not scores and ev.route is not None:
        scores = [(ev.route, ev.confidence)]
        if ev.runner_up is not None and ev.runner_up_confidence is not None:
            scores.append((ev.runner_up, ev.runner_up_confidence))
    return {
        "router": ev.path[-1] if ev.path else "",
        "route": ev.route,
        "confidence": ev.confidence,
        "threshold": ev.threshold,
        "status": ev.status,
        "stage": ev.stage,
        "runner_up": ev.runner_up,
        "runner_up_confidence": ev.runner_up_confidence,
        "reason": ev.reason,
        "scores": scores,
        "usage": _usage(result["usage"]) if isinstance(result.get("usage"), Mapping) else None,
    }


def _attach_models(
    models: list[tuple[str, float, ModelRecord]], by_session: dict[str, list[TraceNode]], root: TraceNode
) -> None:
    """Put each model call under the run of its session that was open when it ended."""
    for session_id, ts, rec in models:
        candidates = by_session.get(session_id) or [root]
        run = next((n for n in reversed(candidates) if n.start <= ts), candidates[0])
        before = [c.end for c in run.children if c.end <= ts]
        started = max([run.start, *before])
        response = rec.response
        node = TraceNode(
            "model",
            rec.model,
            started,
            ts,
            run.path,
            str(response.get("stop_reason") or "end"),
            {
                "usage": _usage(response.get("usage") or {}),
                "response_model": response.get("model_name") or rec.model,
                "text": "".join(rec.chunks),
                "tool_calls": [p.get("name") for p in response.get("parts", ()) if p.get("kind") == "tool_call"],
            },
        )
        run.children.append(node)
        run.children.sort(key=lambda c: (c.start, c.end))
