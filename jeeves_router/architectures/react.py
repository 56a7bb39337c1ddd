"""The default architecture: a tool loop.

model -> tool calls -> results -> model ... until the model answers with text and no tool
call, bounded by the agent's ``max_turns`` (the run then ends with status ``max_turns``).
Tool failures, unknown tools and malformed arguments go back to the model as error
results. A tool that returns a :class:`~jeeves_router.tools.Handoff` ends the turn at once:
later calls of the same turn are answered "ignored", no further model call is made, and
``ctx.handoff`` tells the enclosing architecture where to go.

Recovery (opt-in): with ``ToolLoop(recovery=Recovery(...))``, or when the agent has a
``classify_error`` hook, a failed model call or tool-infrastructure step (the runtime
raising around a tool) goes through the shared escalation ladder: RETRIABLE is retried
after a backoff — a model stream only when none of that attempt's text reached the
consumer —, CRITICAL ends the run with status ``"critical"`` and a report, FATAL raises.
Under ``time_limit_s`` each wait for the model stream's next chunk is bounded by the time the
run has left (a stalled provider is cut; never the consumer's time with a chunk).
RECLASSIFICATION and REPLANNING, which a tool loop cannot act on, are re-raised to an
enclosing architecture that acts on them (a Router with recovery, Capabilities) or, without
one (at the top level, in a handoff chain), stop with a report.
Without recovery, failures propagate unchanged, with their original type.

A failed model call still counts: the usage its failure carries (``spent_usage``: its
requests, failed ones included, and the tokens the provider reported) is added to the run's
usage and entered in the run's ledger, whether the loop retries, stops or re-raises.
So does what a tool paid for (:attr:`~jeeves_router.tools.ToolOutcome.usage`: an agent
run the tool returned, or the ``spent_usage`` of the exception it raised): it is the calling
agent's usage, entered in the ledger under its path (a Router's ``usage_by_route`` counts it
under the route that called the tool, not under the inner agent's name). A tool call the
run's time limit cut off counts the model requests it cut (an agent the tool ran was waiting
on one; :mod:`jeeves_router.recovery.clock`), the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from functools import partial
from typing import TYPE_CHECKING, Any

from .._aio import aclose
from .._frozen import constructor
from ..errors import ModelError, UsageError
from ..events import ToolCalled, ToolResult
from ..ledger import LedgerAnswer
from ..messages import Message, ToolCallPart, ToolResultPart, user
from ..models.base import ModelRequest, ModelResponse, ModelTextDelta
from ..recovery.config import Recovery
from ..recovery.ladder import Action
from ..recovery.run import RecoveryRun, RecoveryStop, recovery_for
from ..results import RunResult
from ..tools import ToolOutcome
from ..usage import NO_USAGE, Usage, spent_usage
from .base import RunContext
from .checks import check_run_request

if TYPE_CHECKING:
    from ..actor import Actor

__all__ = ["ToolLoop"]

# built on every turn and run, without type.__call__ (see constructor)
_run_result = constructor(RunResult)
_model_request = constructor(ModelRequest)


class ToolLoop:
    """Model and tools in a loop until a text answer (the default architecture).

    Args:
        recovery: Recovery config (``None``: failures propagate unless the agent has a
            ``classify_error`` hook, which turns the default recovery on).
    """

    def __init__(self, *, recovery: Recovery | None = None) -> None:
        if recovery is not None and not isinstance(recovery, Recovery):
            raise UsageError(f"recovery must be a Recovery(...) object, got {type(recovery).__name__}")
        self.recovery = recovery

    def validate(self, agent: Actor) -> None:
        """Nothing to check beyond what Agent checks."""

    def prepare(self, agent: Actor, ctx: RunContext) -> None:
        """Refuse ``force_route`` and per-run options: a tool loop has no routes and reads no option."""
        check_run_request(agent, ctx, no_routes="a ToolLoop, which has no routes")

    def run(self, agent: Actor, ctx: RunContext) -> Coroutine[Any, Any, None]:
        """Run the loop, emitting text deltas and tool events."""
        if self.recovery is None and agent.classify_error is None:  # no recovery: no wrapper around the loop
            return self._loop(agent, ctx, None)
        config = recovery_for(self.recovery, agent.classify_error)
        assert config is not None
        return self._run_recovering(agent, ctx, RecoveryRun(config, ctx, can_escalate=ctx.escalate))

    async def _run_recovering(self, agent: Actor, ctx: RunContext, rec: RecoveryRun) -> None:
        try:
            await self._loop(agent, ctx, rec)
        except RecoveryStop as stop:
            await ctx.emit(await rec.stopped(stop))

    async def _loop(self, agent: Actor, ctx: RunContext, rec: RecoveryRun | None) -> None:
        model = agent.resolved_model()  # a bad model string fails here, before any model call
        specs = tuple([t.spec for t in agent.tool_map.values()]) if agent.tool_map else ()
        # a tuple, extended per turn: the request shares it (no list and no copy per turn)
        messages: tuple[Message, ...] = (*ctx.history, user(ctx.prompt))
        first_new = len(ctx.history)  # the messages this run adds start here
        usage = NO_USAGE
        sid, path = ctx.session_id, ctx.path

        def tool_spent(used: Usage) -> None:
            """What a tool's run spent, or the calls the time box cut off in it: the calling agent's usage."""
            nonlocal usage
            if used is not NO_USAGE and used != NO_USAGE:
                ctx.ledger.spent(path, used)  # as its own model calls are
                usage = usage + used
                if rec is not None:
                    rec.usage = usage

        for _turn in range(agent.max_turns):
            request = _model_request(
                messages=messages,
                system=agent.instructions,
                tools=specs,
                temperature=agent.temperature,
                max_tokens=agent.max_tokens,
            )
            # One model call, inline (no nested generator): retried under recovery only while
            # none of the failed attempt's text reached the consumer.
            attempt = 0
            while True:
                attempt += 1
                if rec is not None:
                    await rec.begin("model")
                texts = ctx.ledger.texts  # the attempt's text reached the consumer if this count moved
                response: ModelResponse | None = None
                stream = ctx.model_stream(model, request)
                if rec is not None:  # under a time limit, each wait for a chunk is bounded by the time left
                    stream = rec.bounded(stream)
                try:
                    try:
                        async for item in stream:
                            if isinstance(item, ModelTextDelta):
                                if item.text:
                                    await ctx.emit_text(item.text)
                            else:
                                response = item
                    finally:
                        await aclose(stream)
                    if response is None:
                        raise ModelError(f"model {model.name} ended its stream without a response", path=path)
                except Exception as exc:
                    spent = spent_usage(exc)  # the failed call's requests (and any tokens reported): they count
                    if spent is not None:
                        ctx.ledger.spent(path, spent)  # an enclosing retry counts the attempt from the ledger
                        usage = usage + spent
                        if rec is not None:
                            rec.usage = usage
                    if rec is None:
                        raise
                    f = rec.fail(
                        exc,
                        operation="model",
                        attempt=attempt,
                        policy=rec.config.retry_policy,
                        hooks=(agent.classify_error,),
                        output_started=ctx.ledger.texts != texts,
                    )
                    if f.action is not Action.RETRY:
                        raise f.stop() from exc
                    await ctx.emit(rec.retry_event(f))
                    await rec.backoff(f)
                    continue
                break
            ctx.ledger.spent(path, response.usage)
            if rec is not None:
                rec.succeeded("model")
            usage = usage + response.usage
            if rec is not None:
                rec.usage = usage
            reply = response.as_message()
            messages = (*messages, reply)
            calls = response.tool_calls
            if not calls:
                ctx.result = _run_result(
                    output=response.text,
                    status="ok",
                    session_id=sid,
                    path=path,
                    usage=usage,
                    usage_by_route={},
                    messages=messages[first_new:],
                )
                return
            results: list[ToolResultPart] = []
            for call in calls:
                # every call is announced, one answered "ignored" after a handoff too: its result pairs with it
                await ctx.emit(
                    ToolCalled(session_id=sid, path=path, call_id=call.id, tool=call.name, arguments=call.arguments)
                )
                if ctx.handoff is not None:
                    outcome = ToolOutcome(
                        f"ignored: this turn already handed off to {ctx.handoff.target}", is_error=True
                    )
                    ctx.ignored = (*ctx.ignored, call)  # a chain reports an ignored handoff (handoffs.state)
                else:
                    call_tool = partial(self._call, agent, ctx, call, tool_spent)
                    if rec is None:
                        outcome = await call_tool()
                    else:
                        op, policy, hooks = f"tool:{call.name}", rec.config.retry_policy, (agent.classify_error,)
                        # part of this model turn: only a retry of the call counts as a step (max_steps);
                        # an agent the tool ran that the time limit cut off mid-call spent its cut request
                        outcome = await rec.call_retrying(
                            op, call_tool, policy=policy, hooks=hooks, within_turn=True, spent=tool_spent
                        )
                    tool_spent(outcome.usage)  # an agent the tool ran (or the failed call it raised) was paid for
                    if outcome.handoff is not None and not ctx.takes_handoff:  # no chain to run its target
                        outcome = _nowhere_to_hand_off(agent, outcome.handoff.target)
                    if outcome.handoff is not None:
                        ctx.handoff = outcome.handoff
                    if outcome.context_update:
                        ctx.context = {**ctx.context, **outcome.context_update}
                await ctx.emit(
                    ToolResult(
                        session_id=sid,
                        path=path,
                        call_id=call.id,
                        tool=call.name,
                        content=outcome.content,
                        is_error=outcome.is_error,
                        from_ledger=type(outcome) is LedgerAnswer,  # a retry's call answered, not run again
                    )
                )
                results.append(ToolResultPart(call.id, call.name, outcome.content, outcome.is_error))
            tool_msg = Message("tool", tuple(results))
            messages = (*messages, tool_msg)
            if ctx.handoff is not None:
                ctx.result = RunResult(
                    output=None,
                    status="ok",
                    session_id=sid,
                    path=path,
                    usage=usage,
                    messages=messages[first_new:],
                    metadata={"handoff": ctx.handoff.target},
                )
                return
        ctx.result = RunResult(
            output=None,
            status="max_turns",
            session_id=sid,
            path=path,
            usage=usage,
            messages=messages[first_new:],
            metadata={"max_turns": agent.max_turns},
        )

    @staticmethod
    async def _call(agent: Actor, ctx: RunContext, call: ToolCallPart, spent: Callable[[Usage], None]) -> ToolOutcome:
        if call.argument_error is not None:
            return ToolOutcome(
                f"the arguments of {call.name} were not a valid JSON object ({call.argument_error}); "
                "call the tool again with a JSON object",
                is_error=True,
            )
        tool = agent.tool_map.get(call.name)
        if tool is None:
            known = ", ".join(agent.tool_map) or "none"
            return ToolOutcome(f"unknown tool {call.name!r}; available tools: {known}", is_error=True)
        try:
            return await ctx.call_tool(tool, call)
        except Exception as exc:  # a tool that cannot say whether it ran (ToolOutcomeUnknown) raises: its spend counts
            used = spent_usage(exc)
            if used is not None:
                spent(used)
            raise


def _nowhere_to_hand_off(agent: Actor, target: str) -> ToolOutcome:
    """A tool's Handoff in a run no handoff chain takes: an unknown target, as a chain answers one."""
    return ToolOutcome(
        f"unknown handoff target {target!r}: agent {agent.name!r} has no agent to hand off to; "
        "answer the request yourself",
        is_error=True,
    )
