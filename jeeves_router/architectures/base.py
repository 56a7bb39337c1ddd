"""What every architecture shares: the run context and the Architecture protocol."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from .._aio import aclose
from .._log import get_logger
from ..classify.types import Classifier, ClassifyRequest, ClassifyResult
from ..errors import RunError
from ..events import Event, RunCompleted, RunFailed, RunStarted
from ..ledger import Ledger
from ..messages import Message, ToolCallPart
from ..models.base import Model, ModelRequest, ModelStreamItem
from ..results import RunResult
from ..runtime import PASS_THROUGH, Runtime, StepKey
from ..tools import Tool, ToolContext, ToolOutcome, open_toolsets
from ..tracing import traced_run

if TYPE_CHECKING:
    from ..actor import Actor
    from ..tools import Handoff

__all__ = ["Architecture", "RunContext", "run_child"]

log = get_logger(__name__)

T = TypeVar("T")


@dataclass(slots=True, eq=False)
class RunContext:
    """Mutable state of one agent's run, handed to its architecture.

    Attributes:
        agent: The agent being run.
        session_id: Its session id.
        path: Its route path.
        prompt: The request text.
        history: Earlier conversation turns.
        context: Context variables (replace, never mutate: copy on write).
        run_id: Identifies this turn within the session (for journaling).
        runtime: The durability port every step goes through.
        force_route: Direct mode: skip classification and use this route.
        options: Architecture-specific per-run options.
        result: Set by the architecture before it finishes.
        handoff: Set by the tool loop when a tool returned a Handoff.
        resume_run: Set by :meth:`Agent.resume` only: the recorded run to replay.
        ledger: The root run's attempt ledger, shared by every child run.
    """

    agent: Actor
    session_id: str
    path: tuple[str, ...]
    prompt: str
    history: tuple[Message, ...] = ()
    context: Mapping[str, Any] = field(default_factory=dict)
    run_id: str = "0"
    runtime: Runtime = PASS_THROUGH
    force_route: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    result: RunResult | None = None
    handoff: Handoff | None = None
    resume_run: str | None = None
    ledger: Ledger = field(default_factory=Ledger)
    _step: int = 0

    def child(
        self,
        agent: Actor,
        *,
        session_id: str,
        path: tuple[str, ...],
        prompt: str | None = None,
        history: tuple[Message, ...] | None = None,
    ) -> RunContext:
        """A context for a sub-agent's run that shares this run's runtime and context."""
        return RunContext(
            agent=agent,
            session_id=session_id,
            path=path,
            prompt=self.prompt if prompt is None else prompt,
            history=self.history if history is None else history,
            context=self.context,
            run_id=self.run_id,
            runtime=self.runtime,
            options=dict(self.options.get("child_options", {})),
            ledger=self.ledger,
        )

    def next_key(self, name: str) -> StepKey:
        """The key of the next step of this run."""
        key = StepKey(self.session_id, self.run_id, name, self._step)
        self._step += 1
        return key

    def model_stream(
        self, model: Model, request: ModelRequest, *, name: str = "model"
    ) -> AsyncIterator[ModelStreamItem]:
        """Stream one model call through the runtime."""
        return self.runtime.model_stream(self.next_key(name), model, request)

    async def call_tool(self, tool: Tool, call: ToolCallPart) -> ToolOutcome:
        """Run one tool call through the runtime, unless it already completed in this run.

        A framework retry runs a step again under the same keys; a call of the same tool
        with the same arguments that completed under this key is answered from the
        run's ledger, so a retry never executes a completed side effect twice.
        """
        key = self.next_key(f"tool:{tool.name}")
        done = self.ledger.completed_call(key.session_id, key.index, tool.name, call.arguments)
        if done is not None:
            return done
        tctx = ToolContext(self.session_id, self.path, self.context)

        async def perform() -> ToolOutcome:
            return await tool.call(call.arguments, tctx)

        outcome = await self.runtime.step(
            key, {"id": call.id, "name": call.name, "arguments": dict(call.arguments)}, perform
        )
        if not outcome.is_error:
            self.ledger.complete_call(key.session_id, key.index, tool.name, call.arguments, outcome)
        return outcome

    async def record(self, name: str, input: Any, fn: Callable[[], Awaitable[T]]) -> T:
        """Run any other step whose result a replay must see again (e.g. a sticky-session lookup)."""
        return await self.runtime.step(self.next_key(name), input, fn)

    async def classify(
        self, classifier: Classifier, request: ClassifyRequest, *, name: str = "classify"
    ) -> ClassifyResult:
        """Run one classification through the runtime."""

        async def perform() -> ClassifyResult:
            return await classifier.classify(request)

        key = self.next_key(name)
        return await self.runtime.step(
            key,
            {"text": request.text, "routes": [r.name for r in request.routes], "feedback": request.feedback},
            perform,
        )


class Architecture(Protocol):
    """How an agent turns a request into an answer.

    ``run`` is an async generator of events; it must set ``ctx.result`` before it ends.
    """

    def validate(self, agent: Actor) -> None:
        """Check the architecture fits ``agent``; raise UsageError otherwise."""
        ...

    def run(self, agent: Actor, ctx: RunContext) -> AsyncIterator[Event]:
        """Execute one run, yielding its events."""
        ...


async def run_child(
    agent: Actor, ctx: RunContext, *, architecture: Architecture | None = None, announce: bool = True
) -> AsyncIterator[Event]:
    """Run ``agent`` on ``ctx`` and emit its run events: the one place that does it.

    Every run — the root run of :meth:`Agent.run`, a routed specialist, a handoff target,
    a capability agent — goes through here, so ``run.started`` and then ``run.completed``
    (with the result) or ``run.failed`` (then the exception is re-raised, with its type)
    are emitted exactly once per run.

    Args:
        agent: The agent to run.
        ctx: Its run context; ``ctx.result`` is set when the run completes.
        architecture: Run this architecture instead of ``agent.architecture`` (a handoff
            chain runs the architecture its chain wraps).
        announce: ``False`` for a turn that continues the enclosing run under the same
            session and path (its events belong to that run).
    """
    arch = agent.architecture if architecture is None else architecture
    if not announce:
        inner = arch.run(agent, ctx)
        try:
            async for ev in inner:
                yield ev
        finally:
            await aclose(inner)
        return
    sid, path = ctx.session_id, ctx.path
    yield RunStarted(session_id=sid, path=path, agent=agent.name, prompt=ctx.prompt)
    try:
        # an agent run as itself opens its toolsets (MCP servers) for the run, and closes them with it
        async with open_toolsets(agent) if architecture is None else nullcontext():
            events = traced_run(arch.run(agent, ctx), agent, ctx)
            try:
                async for ev in events:
                    yield ev
            finally:
                await aclose(events)
    except Exception as exc:
        severity = exc.severity if isinstance(exc, RunError) else None
        log.info("run failed", session_id=sid, path=path, error_type=type(exc).__name__)
        yield RunFailed(session_id=sid, path=path, error_type=type(exc).__name__, message=str(exc), severity=severity)
        raise
    if ctx.result is None:
        raise RuntimeError(f"architecture {type(arch).__name__} ended without a result")
    yield RunCompleted(session_id=sid, path=path, result=ctx.result)
