"""The parts of one capability step besides its loop: session id, prompt, the handler's run, closing event.

:meth:`Capabilities.execute <.architecture.Capabilities.execute>` runs a step under the
recovery ladder; these build what it hands to the capability, perform one attempt of its
handler (an agent's child run context and output, a function's call) and what it emits.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from ...events import CapabilityCompleted
from ...ids import _MAX_NAME, child_session_id  # the longest route name child_session_id takes
from ...recovery.clock import take_cut
from ...recovery.run import RecoveryRun
from ...tools import ToolOutcome
from ..base import RunContext
from .capability import Capability, CapabilityCall, CapabilityOutput, RunState
from .failure import ended

__all__ = ["agent_output", "call_function", "child_context", "completed", "step_prompt", "step_session_id"]


def step_session_id(ctx: RunContext, cap: Capability, index: int) -> str:
    """The session id of step ``index`` (1-based, unique within the run) of capability ``cap``.

    The step number makes it unique: a capability that runs twice in one plan gets two
    sessions, so the ledger (and a journal) never answers the second step's tool calls and
    model turns with the first's. A name too long to take the suffix within the 48
    characters a route name may have is shortened (the suffix, not the name, makes it unique).
    """
    suffix = f"-{index}"
    name = cap.name[: _MAX_NAME - len(suffix)].rstrip("-_")
    return child_session_id(ctx.session_id, f"{name}{suffix}")


def step_prompt(task: str, objective: str, done: Sequence[tuple[str, str]]) -> str:
    """The prompt of a capability agent's step: its task, the overall request, the results so far."""
    parts = [task]
    if objective and objective != task:
        parts.append(f"Overall request: {objective}")
    if done:
        parts.append("Results so far:\n" + "\n".join(f"- {c}: {t}" for c, t in done))
    return "\n\n".join(parts)


def completed(
    ctx: RunContext, name: str, started: float, index: int, *, ok: bool, from_ledger: bool = False
) -> CapabilityCompleted:
    """The event that closes one attempt of capability ``name`` (step ``index``), begun at ``started``.

    ``from_ledger``: the ledger answered the step's call (a retry's, of a function capability): it did not run.
    """
    return CapabilityCompleted(
        session_id=ctx.session_id,
        path=ctx.path,
        capability=name,
        duration_s=time.monotonic() - started,
        ok=ok,
        step=index,
        from_ledger=from_ledger,
    )


def child_context(ctx: RunContext, st: RunState, cap: Capability, task: str, index: int) -> RunContext:
    """The run context of an agent capability's step ``index``: its own session, its step prompt, no history."""
    prompt = step_prompt(task, st.task, st.done)
    return ctx.child(
        cap.handler,
        session_id=step_session_id(ctx, cap, index),
        path=(*ctx.path, cap.name),
        prompt=prompt,
        history=(),
        escalate=True,
    )


def agent_output(ctx: RunContext, cap: Capability, child: RunContext) -> CapabilityOutput:
    """What an agent capability's finished run gives the step; raises when it did not end ``ok`` or ``fallback``."""
    res = child.result
    assert res is not None
    if res.status not in ("ok", "fallback"):
        raise ended(cap, res) from child.failure  # a critical stop's own exception, if it had one
    ctx.context = child.context
    return CapabilityOutput(res.output or "", usage=res.usage)


async def call_function(
    ctx: RunContext, rec: RecoveryRun, st: RunState, cap: Capability, task: str, index: int, attempt: int
) -> CapabilityOutput:
    """Call a function capability for one attempt, as a tool is called (the ledger and a journal see it)."""
    child_sid = step_session_id(ctx, cap, index)
    call = CapabilityCall(task, st.task, dict(ctx.context), tuple(st.done), child_sid, (*ctx.path, cap.name), attempt)

    async def perform() -> CapabilityOutput:
        value = await cap.handler(call)
        if isinstance(value, CapabilityOutput):
            return value
        return CapabilityOutput(value if isinstance(value, str) else str(value))

    # a call as a tool's is: the ledger answers a retry's, a journal marks it started (see Capability.repeatable)
    step = {"capability": cap.name, "task": task}
    try:
        with rec.time_box():
            got: CapabilityOutput | ToolOutcome = await ctx.call(f"capability:{cap.name}", cap, step, step, perform)
    except TimeoutError as exc:
        cut = take_cut(exc)  # the model calls of the function the time box cut off (they were sent)
        if cut is not None:
            st.add(cap.name, cut, rec)
        raise
    if isinstance(got, ToolOutcome):  # skipped: a resume's on_unknown_tool_outcome="skip" did not call it again
        return CapabilityOutput(got.content)
    return got
