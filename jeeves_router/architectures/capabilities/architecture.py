"""Capability routing: select several capabilities per task, then run them by plan.

A :class:`Capability` is a named handler — an :class:`~jeeves_router.Agent` or an async
function — with a description, an optional few-shot :class:`ClassifierGuide`, and the
context types it ``requires`` and ``provides``. The :class:`Capabilities` architecture:

1. optionally turns the conversation into one task statement (``task_extraction``), so a
   follow-up such as "and for last month?" is classified with its antecedent;
2. selects capabilities (:mod:`._selection`): always-active first, the others by one
   yes/no call each under a semaphore; ``bypass`` (or ``options={"bypass_selection":
   True}`` per run) takes them all without asking;
3. orchestrates: ``"plan_first"`` — the orchestrator writes a JSON plan, validated against
   the registered capabilities, whose steps then run in order; ``"react"`` — the
   orchestrator picks one step at a time and sees each result, up to ``max_iterations``.

Every step runs under the recovery ladder (on by default here): RETRIABLE retries the
step with the capability's policy; REPLANNING asks for a new plan (``max_replans``);
RECLASSIFICATION selects again without the failed capability (``max_reclassifications``);
CRITICAL ends the run with status ``"critical"`` and a report; FATAL raises.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Literal

from ..._args import listed
from ...errors import UsageError
from ...events import CapabilitiesSelected, CapabilityCompleted, CapabilityStarted
from ...ids import validate_route_names
from ...messages import assistant, user
from ...models.base import Model, ModelRequest, ModelResponse
from ...models.registry import check_model, resolve_model
from ...policies import check_count
from ...recovery.config import Recovery
from ...recovery.run import IMPLIED_RECOVERY, RecoveryRedirect, RecoveryRun, RecoveryStop
from ...recovery.severity import ErrorSeverity, ExecutionError
from ...results import RunResult
from ...usage import NO_USAGE
from ..base import RunContext
from ..base import execute as execute_agent
from ..checks import check_run_request, check_unused_agent_options
from .capability import (
    ORCHESTRATOR_USAGE_KEY,
    SELECTION_USAGE_KEY,
    Capability,
    CapabilityCall,
    CapabilityFunction,
    CapabilityOutput,
    ClassifierExample,
    ClassifierGuide,
    RunState,
    StepDid,
)
from .orchestrate import orchestrate
from .selection import Selection, select_capabilities
from .steps import agent_output, call_function, child_context, completed

if TYPE_CHECKING:
    from ...actor import Actor

__all__ = [
    "Capabilities",
    "Capability",
    "CapabilityCall",
    "CapabilityFunction",
    "CapabilityOutput",
    "ClassifierExample",
    "ClassifierGuide",
    "ORCHESTRATOR_USAGE_KEY",
    "SELECTION_USAGE_KEY",
]


class Capabilities:
    """Select capabilities per task, then run them by plan (``plan_first``) or step by step (``react``).

    Args:
        capabilities: The capabilities (unique names).
        mode: ``"plan_first"`` or ``"react"``.
        classifier_model: Model of the selection calls (default: the agent's model).
        orchestrator_model: Model of task extraction, planning and ReAct decisions
            (default: the agent's model).
        max_concurrent_classifications: Selection calls in flight at once (default 5).
        task_extraction: Turn the conversation into one task statement first.
        bypass: Select every capability without asking (per run:
            ``options={"bypass_selection": True}``).
        max_iterations: Bound on ReAct steps (default 100).
        recovery: Recovery config (default ``Recovery()``; its ``expose_details`` is then the parent run's).

    Raises:
        UsageError: For no capabilities, two whose names differ only by case or ``-``/``_``
            (``billing`` and ``Billing``: the Router's route-name rule), or an option of the wrong type
            (``bypass="no"``, ``max_iterations=True``), naming it.
    """

    def __init__(
        self,
        capabilities: Sequence[Capability],
        *,
        mode: Literal["plan_first", "react"] = "plan_first",
        classifier_model: Model | str | None = None,
        orchestrator_model: Model | str | None = None,
        max_concurrent_classifications: int = 5,
        task_extraction: bool = False,
        bypass: bool = False,
        max_iterations: int = 100,
        recovery: Recovery | None = None,
    ) -> None:
        caps = listed(capabilities, what="capabilities", example="Capabilities([Capability('billing', billing_agent)])")
        if not caps:
            raise UsageError("Capabilities needs at least one Capability(name, handler, description)")
        for c in caps:
            if not isinstance(c, Capability):
                raise UsageError(f"capabilities must be Capability objects, got {type(c).__name__}")
        # the Router's rule: no two names alike but for case or '-'/'_' (a model's answer cannot tell them apart)
        validate_route_names([c.name for c in caps], owner="Capabilities", what="capability")
        if mode not in ("plan_first", "react"):
            raise UsageError(f"mode must be 'plan_first' or 'react', got {mode!r}")
        check_count("max_concurrent_classifications", max_concurrent_classifications, 1)
        check_count("max_iterations", max_iterations, 1)
        for flag, value in (("task_extraction", task_extraction), ("bypass", bypass)):
            if not isinstance(value, bool):  # bypass="no" would select every capability
                raise UsageError(f"{flag} must be True or False, got {value!r}")
        self.capabilities: tuple[Capability, ...] = tuple(caps)
        self.by_name = {c.name: c for c in caps}
        self.mode = mode
        check_model(classifier_model, what="classifier_model")
        check_model(orchestrator_model, what="orchestrator_model")
        self.classifier_model = classifier_model
        self.orchestrator_model = orchestrator_model
        self.max_concurrent_classifications = max_concurrent_classifications
        self.task_extraction = task_extraction
        self.bypass = bypass
        self.max_iterations = max_iterations
        self.recovery = recovery if recovery is not None else IMPLIED_RECOVERY
        self.resolved_models: dict[str, Model] = {}  # "provider:model" -> the adapter built for it, on first use

    def validate(self, agent: Actor) -> None:
        """The agent needs a model unless both models are given; its tools and handoffs, never used, are refused."""
        check_unused_agent_options(
            agent,
            role="capabilities agent",
            tools_instead="a Capabilities agent only selects, plans and runs its capabilities; give the tools to a "
            "capability's agent (Capability(name, Agent(..., tools=[...]), description)) or make the work a "
            "function capability",
            handoffs_instead="a Capabilities agent runs capabilities by plan, it never hands off; make each target "
            "a Capability(name, agent, description), or give the handoffs to a capability's agent",
        )
        if agent.model is None and (self.orchestrator_model is None or self.classifier_model is None):
            raise UsageError(
                f"capabilities agent {agent.name!r} has no model: pass model=... to the Agent, or "
                "classifier_model=... and orchestrator_model=... to Capabilities"
            )

    def prepare(self, agent: Actor, ctx: RunContext) -> None:
        """Refuse ``force_route`` (no routes) and options it does not read (it reads ``bypass_selection``)."""
        no_routes = "Capabilities; to run every capability, pass options={'bypass_selection': True}"
        check_run_request(agent, ctx, options=("bypass_selection",), no_routes=no_routes)

    def _model(self, agent: Actor, which: Model | str | None, what: str) -> Model:
        """The agent's model, or ``which``: a string is resolved once and its adapter kept for every run."""
        if which is None:
            return agent.resolved_model()
        if not isinstance(which, str):
            return resolve_model(which, what=what)
        model = self.resolved_models.get(which)
        if model is None:
            model = self.resolved_models[which] = resolve_model(which, what=what)
        return model

    async def run(self, agent: Actor, ctx: RunContext) -> None:
        """Extract, select, orchestrate; emits capability and recovery events (the agents emit their own)."""
        rec = RecoveryRun(self.recovery, ctx, can_escalate=ctx.escalate)
        st = RunState(ctx.ledger, ctx.path, task=ctx.prompt)
        try:
            await self._flow(agent, ctx, rec, st)
        except RecoveryStop as stop:
            await ctx.emit(await rec.stopped(stop, usage_by_route=dict(st.by_route), metadata=st.metadata(self.mode)))
            return
        ctx.result = RunResult(
            output=st.output,
            status=st.status,
            session_id=ctx.session_id,
            path=ctx.path,
            usage=st.usage,
            usage_by_route=dict(st.by_route),
            metadata=st.metadata(self.mode),
            messages=(user(ctx.prompt), *((assistant(st.output),) if st.output is not None else ())),
        )

    async def request(
        self, ctx: RunContext, rec: RecoveryRun, st: RunState, model: Model, request: ModelRequest, name: str
    ) -> ModelResponse:
        """One orchestrator model call through the runtime; its usage is counted, a failed call's too."""
        key = ctx.next_key(name)
        payload = {"system": request.system, "messages": [m.text for m in request.messages]}
        try:
            response = await ctx.runtime.step(key, payload, lambda: model.request(request))
        except Exception as exc:
            st.spent(ORCHESTRATOR_USAGE_KEY, exc, rec)
            raise
        st.add(ORCHESTRATOR_USAGE_KEY, response.usage, rec)
        return response

    async def _flow(self, agent: Actor, ctx: RunContext, rec: RecoveryRun, st: RunState) -> None:
        orchestrator = self._model(agent, self.orchestrator_model, "orchestrator_model")
        hooks = (agent.classify_error,)
        orchestrated = partial(st.add, ORCHESTRATOR_USAGE_KEY, rec=rec)  # what the time box cut off counts too
        if self.task_extraction:
            from .planning import extraction_request

            req = extraction_request(ctx.history, ctx.prompt)
            extract = partial(self.request, ctx, rec, st, orchestrator, req, "extract_task")
            response = await rec.call_retrying("extract_task", extract, hooks=hooks, spent=orchestrated)
            st.task = response.text.strip() or ctx.prompt
        bypass = bool(ctx.options.get("bypass_selection", self.bypass))
        selector = self._model(agent, self.classifier_model, "classifier_model")
        feedback: str | None = None
        selected = partial(st.add, SELECTION_USAGE_KEY, rec=rec)
        while True:

            def select(fb: str | None = feedback) -> Awaitable[Selection]:
                return select_capabilities(
                    ctx,
                    self.capabilities,
                    task=st.task,
                    model=selector,
                    max_concurrent=self.max_concurrent_classifications,
                    excluded=tuple(st.excluded),
                    feedback=fb,
                    bypass=bypass,
                    lost=selected,  # a failed selection's calls count too
                )

            sel = await rec.call_retrying("select", select, hooks=hooks, spent=selected)
            st.add(SELECTION_USAGE_KEY, sel.usage, rec)
            st.selected = sel.chosen
            await ctx.emit(
                CapabilitiesSelected(
                    session_id=ctx.session_id,
                    path=ctx.path,
                    capabilities=sel.chosen,
                    always_active=sel.always_active,
                    skipped=sel.skipped,
                    bypass=bypass,
                )
            )
            if not sel.chosen:
                err = ExecutionError(ErrorSeverity.CRITICAL, "no capability was selected for the task")
                raise rec.fail(err, operation="select", attempt=1, policy=rec.config.framework_retry).stop()
            try:
                await orchestrate(self, agent, ctx, rec, st, orchestrator)
                return
            except RecoveryRedirect as redirect:
                f = redirect.failure
                if f.capability is not None:
                    st.excluded.append(f.capability)
                feedback = f.feedback()
                await ctx.emit(rec.reclassify_event(f, st.excluded))

    async def execute(self, agent: Actor, ctx: RunContext, rec: RecoveryRun, st: RunState, name: str, task: str) -> str:
        """Run one capability step under the ladder, emitting its events; RecoveryRedirect to replan/reclassify.

        Returns the step's result text. A step with the same capability and task as one that
        completed a call with effects (of a tool or a function capability that is not
        ``repeatable``, such as a refund) is not run again, in any plan: a refund is not made
        twice. One that only read (``repeatable`` ones) runs again. An agent's step that called
        no tool and completed before the last replan or reclassification answers one repeat of
        a later plan (:meth:`RunState.earlier`).
        A step answered so is announced by ``answered_from``.
        """
        cap = self.by_name[name]
        st.steps += 1
        index = st.steps
        generation = rec.replans + rec.reclassifications  # which plan this step belongs to
        earlier = st.earlier(name, task, generation)  # one earlier completion per repeat, in order
        if earlier is not None:
            await ctx.emit(
                CapabilityCompleted(
                    session_id=ctx.session_id,
                    path=ctx.path,
                    capability=name,
                    duration_s=0.0,
                    step=index,
                    answered_from=earlier[1],
                )
            )
            return earlier[2]
        operation = f"capability:{name}"
        attempt = 0
        effects_before, reads_before = ctx.ledger.calls, ctx.ledger.reads  # completed tool calls so far
        while True:
            attempt += 1
            await rec.begin(operation)
            await ctx.emit(CapabilityStarted(session_id=ctx.session_id, path=ctx.path, capability=name, step=index))
            started = time.monotonic()
            texts, calls, answered, mark = ctx.ledger.texts, ctx.ledger.calls, ctx.ledger.answered, ctx.ledger.mark()
            try:
                if cap.is_agent:  # its run, events and all
                    child = child_context(ctx, st, cap, task, index)
                    await execute_agent(cap.handler, child)  # its events go straight to the consumer
                    result = agent_output(ctx, cap, child)
                else:
                    result = await call_function(ctx, rec, st, cap, task, index, attempt)
            except Exception as exc:
                await ctx.emit(completed(ctx, name, started, index, ok=False))
                lost = ctx.ledger.since(mark, (*ctx.path, name))  # what the failed attempt's model calls cost
                if lost is not NO_USAGE:
                    st.add(name, lost, rec, entered=True)
                f = rec.fail(
                    exc,
                    operation=operation,
                    attempt=attempt,
                    policy=cap.get_retry_policy(rec.config.retry_policy),
                    hooks=(cap.classify_error, agent.classify_error),
                    capability=name,
                    can_reclassify=len(st.excluded) + 1 < len(self.capabilities),
                    can_replan=True,
                    output_started=ctx.ledger.texts != texts,  # some of its text reached the consumer
                    effects_done=ctx.ledger.calls != calls,  # a new plan could run its completed tool calls again
                )
                f.raise_unless_retry()
                await ctx.emit(rec.retry_event(f))
                await rec.backoff(f)
                continue
            # a function's call the ledger answered (a retry's) did not run: the event says so, as a tool's result does
            from_ledger = not cap.is_agent and ctx.ledger.answered != answered
            await ctx.emit(completed(ctx, name, started, index, ok=True, from_ledger=from_ledger))
            rec.succeeded(operation)
            # an agent's model calls are in the ledger (its run entered them), a function's reported usage is not
            st.add(name, result.usage, rec, entered=cap.is_agent)
            provided = {t: result.context.get(t, result.text) for t in cap.provides}
            ctx.context = {**ctx.context, **result.context, **provided}
            st.done.append((name, result.text))
            read = ctx.ledger.reads != reads_before
            did: StepDid = "effects" if ctx.ledger.calls != effects_before else "reads" if read else ""
            st.complete(name, task, generation, index, result.text, did=did)
            return result.text
