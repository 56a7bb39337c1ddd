"""Orchestration of selected capabilities: ``plan_first`` and ``react``.

Both ask the orchestrator model under the framework retry policy; an unusable reply is a
REPLANNING failure (see :mod:`._planning`) and goes through the same ladder as a failing
step. A step that fails with REPLANNING sends the run back to the orchestrator with the
failure in the prompt (``recovery.replan``); RECLASSIFICATION propagates to the selection
loop of :class:`~.capabilities.Capabilities`.
"""

from __future__ import annotations

from collections.abc import Coroutine
from functools import partial
from typing import TYPE_CHECKING, Any

from ...models.base import Model
from ...recovery.ladder import Action
from ...recovery.run import RecoveryRedirect, RecoveryRun
from ..base import RunContext
from .capability import ORCHESTRATOR_USAGE_KEY
from .planning import PlanStep, ReactChoice, parse_plan, parse_react_choice, plan_problem, plan_request, react_request

if TYPE_CHECKING:
    from ...actor import Actor
    from .architecture import Capabilities
    from .capability import RunState

__all__ = ["orchestrate"]


def orchestrate(
    arch: Capabilities, agent: Actor, ctx: RunContext, rec: RecoveryRun, st: RunState, model: Model
) -> Coroutine[Any, Any, None]:
    """Run the selected capabilities in ``arch.mode``, emitting their events; sets ``st.output`` and ``st.status``."""
    runner = _plan_first if arch.mode == "plan_first" else _react
    return runner(arch, agent, ctx, rec, st, model)


async def _plan_first(
    arch: Capabilities, agent: Actor, ctx: RunContext, rec: RecoveryRun, st: RunState, model: Model
) -> None:
    feedback: str | None = None
    orchestrated = partial(st.add, ORCHESTRATOR_USAGE_KEY, rec=rec)  # what the time box cut off counts too
    while True:
        allowed = {c.name: c for c in arch.capabilities if c.name not in st.excluded}
        shown = [c for c in arch.capabilities if c.name in st.selected and c.name not in st.excluded]
        request = plan_request(st.task, shown, done=st.done, feedback=feedback, context_keys=list(ctx.context))

        async def make_plan() -> tuple[PlanStep, ...]:
            response = await arch.request(ctx, rec, st, model, request, "plan")  # noqa: B023 - awaited at once
            return parse_plan(response.text, allowed, list(ctx.context))  # noqa: B023

        try:
            hooks = (agent.classify_error, plan_problem)
            steps = await rec.call_retrying("plan", make_plan, hooks=hooks, can_replan=True, spent=orchestrated)
            st.plan = tuple((s.capability, s.task) for s in steps)
            last: str | None = None  # the plan's last step answers (also when an earlier result answered it)
            for step in steps:
                last = await arch.execute(agent, ctx, rec, st, step.capability, step.task)
        except RecoveryRedirect as redirect:
            if redirect.failure.action is not Action.REPLAN:
                raise
            feedback = redirect.failure.feedback()
            await ctx.emit(rec.replan_event(redirect.failure))
            continue
        st.output = last if last is not None else st.done[-1][1] if st.done else None
        return


async def _react(
    arch: Capabilities, agent: Actor, ctx: RunContext, rec: RecoveryRun, st: RunState, model: Model
) -> None:
    feedback: str | None = None
    orchestrated = partial(st.add, ORCHESTRATOR_USAGE_KEY, rec=rec)  # what the time box cut off counts too
    for _ in range(arch.max_iterations):
        allowed = {c.name: c for c in arch.capabilities if c.name not in st.excluded}
        shown = [c for c in arch.capabilities if c.name in st.selected and c.name not in st.excluded]
        request = react_request(st.task, shown, done=st.done, feedback=feedback)

        async def choose() -> ReactChoice:
            response = await arch.request(ctx, rec, st, model, request, "orchestrate")  # noqa: B023 - awaited at once
            return parse_react_choice(response.text, allowed, list(ctx.context))  # noqa: B023

        try:
            hooks = (agent.classify_error, plan_problem)
            choice = await rec.call_retrying("orchestrate", choose, hooks=hooks, can_replan=True, spent=orchestrated)
            if choice.step is None:
                st.output = choice.answer
                return
            st.plan = (*st.plan, (choice.step.capability, choice.step.task))
            await arch.execute(agent, ctx, rec, st, choice.step.capability, choice.step.task)
            feedback = None
        except RecoveryRedirect as redirect:
            if redirect.failure.action is not Action.REPLAN:
                raise
            feedback = redirect.failure.feedback()
            await ctx.emit(rec.replan_event(redirect.failure))
    st.status = "max_turns"
    st.output = None
