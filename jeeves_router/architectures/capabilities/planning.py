"""Orchestrator prompts and the readers of its replies (task extraction, plans, ReAct steps).

Replies are JSON objects (a fenced or surrounded one is found). Anything unusable —
no JSON, an unknown or excluded capability, a step whose required context type neither
the context holds nor an earlier step provides — raises :class:`PlanRejected` (an
:class:`ExecutionError` with severity REPLANNING), so the recovery ladder asks again with the
problem in the prompt, up to ``max_replans``. The problem is the library's own account of the
orchestrator's reply, so :func:`plan_problem` shows it in that prompt (as the classification's
``problem``) whatever ``Recovery(expose_details=...)`` says, which governs exceptions' messages.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...messages import Message, text_of, user
from ...models.base import ModelRequest
from ...recovery.severity import ErrorClassification, ErrorSeverity, ExecutionError

if TYPE_CHECKING:
    from .capability import Capability

__all__ = [
    "PlanRejected",
    "PlanStep",
    "ReactChoice",
    "extraction_request",
    "plan_request",
    "react_request",
    "parse_plan",
    "parse_react_choice",
    "plan_problem",
]

_EXTRACT_SYSTEM = (
    "Rewrite the user's latest message as one self-contained task statement, resolving references to "
    "the earlier conversation (for example 'and for last month?'). Reply with the task statement only."
)
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


class PlanRejected(ExecutionError):
    """The orchestrator's reply is not a usable plan or step: REPLANNING, with what was wrong with it."""

    def __init__(
        self, message: str, capability_name: str | None = None, metadata: Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(ErrorSeverity.REPLANNING, message, capability_name, metadata)


def plan_problem(exc: BaseException, context: object) -> ErrorClassification | None:
    """The plan and ReAct steps' own hook: a :class:`PlanRejected` reply, with its problem for the orchestrator.

    Asked after the agent's ``classify_error``. The problem names nothing but the
    orchestrator's own reply and the capabilities, so the replan prompt shows it
    (``problem: ...``) even where the exception's message is not shown.
    """
    if isinstance(exc, PlanRejected):
        return ErrorClassification(ErrorSeverity.REPLANNING, metadata={"problem": exc.message})
    return None


@dataclass(frozen=True, slots=True)
class PlanStep:
    """One step of a plan: a capability and what it should do."""

    capability: str
    task: str


@dataclass(frozen=True, slots=True)
class ReactChoice:
    """The orchestrator's next move in ReAct mode: a step, or the final answer."""

    step: PlanStep | None = None
    answer: str | None = None


def extraction_request(history: Sequence[Message], prompt: str) -> ModelRequest:
    """The task-extraction call: the conversation in, one task statement out."""
    convo = text_of(history) if history else ""
    body = f"Conversation so far:\n{convo}\n\nLatest message:\n{prompt}" if convo else f"Latest message:\n{prompt}"
    return ModelRequest(messages=(user(body),), system=_EXTRACT_SYSTEM, temperature=0.0, max_tokens=256)


def _capability_lines(caps: Sequence[Capability]) -> str:
    lines = []
    for c in caps:
        line = f"- {c.name}: {c.description or c.name}"
        if c.requires:
            line += f" (needs: {', '.join(c.requires)})"
        if c.provides:
            line += f" (provides: {', '.join(c.provides)})"
        lines.append(line)
    return "\n".join(lines)


def _done_lines(done: Sequence[tuple[str, str]]) -> str:
    return "\n".join(f"- {cap}: {text}" for cap, text in done)


def plan_request(
    task: str,
    caps: Sequence[Capability],
    *,
    done: Sequence[tuple[str, str]] = (),
    feedback: str | None = None,
    context_keys: Sequence[str] = (),
) -> ModelRequest:
    """The plan-first call: a JSON plan of capability steps for ``task``."""
    system = (
        "You plan how to complete a task with these capabilities:\n"
        f"{_capability_lines(caps)}\n\n"
        'Reply with JSON only: {"steps": [{"capability": "<name>", "task": "<what this step must do>"}]}. '
        "Order steps so that each one's needs are provided by the context or an earlier step. "
        "The last step's answer is given to the user."
    )
    parts = [f"Task: {task}"]
    if context_keys:
        parts.append("Context already holds: " + ", ".join(sorted(context_keys)))
    if done:
        parts.append("Steps already completed (do not repeat them):\n" + _done_lines(done))
    if feedback:
        parts.append("The previous plan failed: " + feedback)
    return ModelRequest(messages=(user("\n\n".join(parts)),), system=system, temperature=0.0, max_tokens=512)


def react_request(
    task: str, caps: Sequence[Capability], *, done: Sequence[tuple[str, str]] = (), feedback: str | None = None
) -> ModelRequest:
    """The ReAct call: the next capability step, or the final answer."""
    system = (
        "You complete a task one step at a time with these capabilities:\n"
        f"{_capability_lines(caps)}\n\n"
        'Reply with JSON only: either {"capability": "<name>", "task": "<what this step must do>"} for the '
        'next step, or {"answer": "<final answer for the user>"} when the task is complete.'
    )
    parts = [f"Task: {task}"]
    if done:
        parts.append("Steps so far and their results:\n" + _done_lines(done))
    if feedback:
        parts.append("The last step failed: " + feedback)
    return ModelRequest(messages=(user("\n\n".join(parts)),), system=system, temperature=0.0, max_tokens=512)


def _json_object(text: str) -> Mapping[str, Any]:
    fenced = _FENCE.search(text or "")
    body = fenced.group(1) if fenced else (text or "")
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end <= start:
        raise PlanRejected("the orchestrator's reply has no JSON object")
    try:
        value = json.loads(body[start : end + 1])
    except json.JSONDecodeError as exc:
        raise PlanRejected(f"the orchestrator's JSON is invalid ({exc.msg})") from None
    if not isinstance(value, dict):
        raise PlanRejected("the orchestrator's reply is not a JSON object")
    return value


def _step(raw: object, allowed: Mapping[str, Capability], available: set[str]) -> PlanStep:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("capability"), str):
        raise PlanRejected("a plan step lacks a 'capability' name")
    name = raw["capability"].strip()
    cap = allowed.get(name)
    if cap is None:
        names = ", ".join(allowed) or "none"
        raise PlanRejected(f"unknown capability {name!r}; use one of: {names}", metadata={"capability": name})
    missing = [t for t in cap.requires if t not in available]
    if missing:
        raise PlanRejected(
            f"step {name!r} needs {', '.join(missing)}, which no earlier step provides",
            capability_name=name,
            metadata={"missing": ", ".join(missing)},
        )
    task = raw.get("task")
    return PlanStep(name, task.strip() if isinstance(task, str) and task.strip() else name)


def parse_plan(text: str, allowed: Mapping[str, Capability], available: Sequence[str]) -> tuple[PlanStep, ...]:
    """The plan in ``text``, validated against ``allowed`` capabilities and context types."""
    steps = _json_object(text).get("steps")
    if not isinstance(steps, list) or not steps:
        raise PlanRejected("the plan has no 'steps' list")
    have = set(available)
    plan = []
    for raw in steps:
        step = _step(raw, allowed, have)
        have.update(allowed[step.capability].provides)
        plan.append(step)
    return tuple(plan)


def parse_react_choice(text: str, allowed: Mapping[str, Capability], available: Sequence[str]) -> ReactChoice:
    """The orchestrator's next move in ``text``, validated like a plan step."""
    obj = _json_object(text)
    answer = obj.get("answer")
    if isinstance(answer, str) and "capability" not in obj:
        return ReactChoice(answer=answer)
    return ReactChoice(step=_step(obj, allowed, set(available)))
