"""What every architecture shares: the run context, the Architecture protocol and :func:`execute`."""

from __future__ import annotations

import types
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Generator, Mapping
from dataclasses import dataclass, field
from functools import partial
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from .._aio import EventPump, aclose, closing, emit
from .._frozen import constructor
from .._log import get_logger
from .._shown import shown_message
from ..classify.types import Classifier, ClassifyRequest, ClassifyResult
from ..errors import RunError
from ..events import Event, EventBase, RunCompleted, RunFailed, RunStarted, TextDelta
from ..ledger import Callee, Ledger
from ..messages import Message, ToolCallPart
from ..models.base import Model, ModelRequest, ModelStreamItem
from ..results import RunResult
from ..runtime import PASS_THROUGH, Runtime, StepKey
from ..tools import Tool, ToolContext, ToolOutcome, open_toolsets
from ..tracing import active_tracer, traced_run, traced_tool_call

if TYPE_CHECKING:
    from ..actor import Actor
    from ..tools import Handoff

__all__ = [
    "Architecture",
    "ArchitectureRun",
    "RunContext",
    "emit_all",
    "emit_each",
    "execute",
    "new_context",
    "run_child",
]

log = get_logger(__name__)

_NAME = attrgetter("name")
_new_tuple = tuple.__new__

# the events every run sends, built without type.__call__ (see constructor)
_run_started = constructor(RunStarted)
_run_completed = constructor(RunCompleted)
_text_delta = constructor(TextDelta)

T = TypeVar("T")

#: What :meth:`Architecture.run` returns: a coroutine that sends its events with
#: ``await ctx.emit(ev)`` (the built-in tool loop and router), or an async iterator of events.
ArchitectureRun = Coroutine[Any, Any, None] | AsyncIterator[Event]


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
        ignored: Set by the tool loop: the calls of the turn that handed off which it answered
            "ignored" (never run), in order, each added before its ``tool.result`` is sent.
        takes_handoff: Set by a handoff chain (a Router's too) on the run of its member: it
            reads ``handoff``. Without it, a tool's Handoff has nowhere to go and the tool
            loop answers it as an unknown target.
        resume_run: Set by :meth:`Agent.resume` only: the recorded run to replay.
        idempotency_key: The client's idempotency key of a root run (names its run; see
            :mod:`jeeves_router.journal.keyed`); ``None`` for a run without one.
        replayed: Set by a journaling runtime when the run is a replay of a completed earlier
            attempt (a retried idempotency key, or :meth:`Agent.resume` of a completed run):
            its answer comes from the journal.
        superseded: Set by a journaling runtime when the run is an older turn of its session,
            run again after a newer turn started (a retried idempotency key, :meth:`Agent.resume`
            of an earlier run): it leaves the session's state alone (a Router's sticky agent is
            the newer turn's). Shared by every child run.
        ledger: The root run's attempt ledger, shared by every child run.
        escalate: An enclosing architecture acts on the failures this run's recovery cannot
            (reclassify, replan): a recovering Router or Capabilities, directly or through
            chains and routers that pass failures on unchanged. Set by the parent.
        failure: The exception that made this run's recovery stop it with a report (status
            ``"critical"``; for a handoff chain or Router, also the one that stopped the member
            whose critical answer ends the run), for an enclosing architecture to report as
            the cause; ``None`` otherwise (also for a stop by ``max_steps`` or the time limit).
        expose_details: Whether an exception's message may leave this run (to a model, an
            event, the journal) or only its type: set by the run's recovery from its
            ``Recovery(expose_details=...)``, else the parent's (:mod:`jeeves_router._shown`).
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
    ignored: tuple[ToolCallPart, ...] = ()
    takes_handoff: bool = False
    resume_run: str | None = None
    idempotency_key: str | None = None
    replayed: bool = False
    superseded: bool = False
    ledger: Ledger = field(default_factory=Ledger)
    escalate: bool = False
    failure: BaseException | None = None
    expose_details: bool = False
    _step: int = 0

    def child(
        self,
        agent: Actor,
        *,
        session_id: str,
        path: tuple[str, ...],
        prompt: str | None = None,
        history: tuple[Message, ...] | None = None,
        escalate: bool = False,
    ) -> RunContext:
        """A context for a sub-agent's run that shares this run's runtime and context.

        ``escalate``: the caller acts on the failures the sub-agent's recovery cannot.
        """
        return new_context(
            agent=agent,
            session_id=session_id,
            path=path,
            prompt=self.prompt if prompt is None else prompt,
            history=self.history if history is None else history,
            context=self.context,
            run_id=self.run_id,
            runtime=self.runtime,
            options=dict(self.options["child_options"]) if "child_options" in self.options else {},
            ledger=self.ledger,
            escalate=escalate,
            superseded=self.superseded,
            expose_details=self.expose_details,
        )

    @types.coroutine
    def emit(self, event: Event) -> Generator[Event, None, None]:
        """Send ``event`` to the run's consumer: ``await ctx.emit(ev)`` (see :func:`jeeves_router._aio.emit`).

        Text deltas are counted in the ledger, so an architecture that retries a child can
        tell whether any of the child's text reached the consumer.
        """
        if isinstance(event, TextDelta):
            self.ledger.texts += 1
        yield event

    @types.coroutine
    def emit_text(self, text: str) -> Generator[Event, None, None]:
        """Send a ``text.delta`` of this run, counted as :meth:`emit` counts it: ``await ctx.emit_text(t)``."""
        self.ledger.texts += 1
        yield _text_delta(session_id=self.session_id, path=self.path, text=text)

    def next_key(self, name: str) -> StepKey:
        """The key of the next step of this run."""
        key = _new_tuple(StepKey, (self.session_id, self.run_id, name, self._step))  # StepKey(...) without its __new__
        if self.ledger.calls:  # a tool call completed in this run: a step at or before it is a retry's
            self.ledger.step(self.session_id, self._step)
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
        with the same arguments that an earlier attempt completed (at this step or, when the
        retried model took another path, at another) is answered from the run's ledger, so a
        retry never executes a completed side effect twice; a ``repeatable`` tool (a read)
        runs again.
        """
        tctx = ToolContext(self.session_id, self.path, self.context, self.expose_details)

        async def perform() -> ToolOutcome:
            outcome: ToolOutcome = await traced_tool_call(
                tool.name, call.id, call.arguments, partial(tool.call, call.arguments, tctx)
            )
            return outcome

        input = {"id": call.id, "name": call.name, "arguments": dict(call.arguments)}
        return await self.call(f"tool:{tool.name}", tool, call.arguments, input, perform)

    async def call(
        self, name: str, callee: Callee, arguments: Mapping[str, Any], input: Any, perform: Callable[[], Awaitable[T]]
    ) -> T:
        """Run one call with possible effects through the runtime, unless it already completed in this run.

        The one path of a tool's call (:meth:`call_tool`) and a function capability's: the
        ledger answers a framework retry's call of the same callee with the same
        ``arguments`` that an earlier attempt completed (a ``repeatable`` callee runs again);
        otherwise the runtime performs it as a call (``name`` starts with one of
        :data:`~jeeves_router.runtime.CALL_STEPS`): a recording runtime marks it started,
        applies its unknown-outcome policy after a crash during it and sets
        :func:`~jeeves_router.runtime.current_idempotency_key` around it. An outcome with
        ``is_error`` set (a failed tool call) is not kept in the ledger; a call the runtime
        skipped (its outcome unknown: :class:`~jeeves_router.ledger.SkippedCall`) is.

        Args:
            name: The step name, e.g. ``"tool:refund"`` or ``"capability:charge"``.
            callee: The tool or function capability (its ``name`` and ``repeatable``).
            arguments: What the ledger matches a retry's call by.
            input: The step's JSON-ready input (digested for replay).
            perform: Makes the call.
        """
        key = self.next_key(name)
        done = self.ledger.completed_call(key.session_id, key.index, callee, arguments)
        if done is not None:
            return cast(T, done)
        outcome = await self.runtime.step(key, input, perform, repeatable=callee.repeatable)
        self.ledger.complete_call(key.session_id, key.index, callee, arguments, outcome)
        return outcome

    def record(self, name: str, input: Any, fn: Callable[[], Awaitable[T]]) -> Awaitable[T]:
        """Run any other step whose result a replay must see again (e.g. a sticky-session lookup)."""
        return self.runtime.step(self.next_key(name), input, fn)

    def classify(
        self, classifier: Classifier, request: ClassifyRequest, *, name: str = "classify"
    ) -> Awaitable[ClassifyResult]:
        """Run one classification through the runtime (``await ctx.classify(...)``).

        Returns the runtime's step itself: no coroutine layer of its own between the
        architecture and the runtime. The pass-through runtime records nothing, so its
        classification is called directly, without describing its input.
        """
        if type(self.runtime) is Runtime:
            self._step += 1  # the step's key, which only a recording runtime reads
            return classifier.classify(request)
        return self.runtime.step(
            self.next_key(name),
            {"text": request.text, "routes": list(map(_NAME, request.routes)), "feedback": request.feedback},
            partial(classifier.classify, request),
        )


new_context = constructor(RunContext)  # a context per run (and per child run), built without type.__call__


class Architecture(Protocol):
    """How an agent turns a request into an answer.

    ``run`` returns a coroutine that sends its events with ``await ctx.emit(ev)`` (the flat
    path: no layer re-yields them) or an async iterator of events; either way it must set
    ``ctx.result`` before it ends. A child agent is run with ``await execute(child, cctx)``.
    """

    def validate(self, agent: Actor) -> None:
        """Check the architecture fits ``agent``; raise UsageError otherwise."""
        ...

    def run(self, agent: Actor, ctx: RunContext) -> ArchitectureRun:
        """Execute one run, emitting (or yielding) its events."""
        ...


def emit_all(body: ArchitectureRun, ctx: RunContext) -> Awaitable[None]:
    """Run an architecture's ``body``: a coroutine as it is, an async iterator's events each emitted."""
    if type(body) is types.CoroutineType:
        return body  # type: ignore[return-value]
    return emit_each(body, ctx)  # type: ignore[arg-type]


async def emit_each(events: AsyncIterator[Event], ctx: RunContext) -> None:
    """Emit every event of ``events`` through ``ctx.emit`` (for a body that yields its events)."""
    try:
        async for ev in events:
            await ctx.emit(ev)
    finally:
        await aclose(events)


def events_of(body: ArchitectureRun) -> AsyncIterator[Event]:
    """``body``'s events as an async iterator (a coroutine body is driven by an :class:`EventPump`)."""
    return EventPump(body, EventBase) if type(body) is types.CoroutineType else body  # type: ignore[arg-type,return-value]


async def execute(
    agent: Actor, ctx: RunContext, *, architecture: Architecture | None = None, announce: bool = True
) -> None:
    """Run ``agent`` on ``ctx`` and emit its run events: the one place that does it.

    Every run — the root run of :meth:`Agent.run`, a routed specialist, a handoff target,
    a capability agent — goes through here, so ``run.started`` and then ``run.completed``
    (with the result) or ``run.failed`` (then the exception is re-raised, with its type)
    are emitted exactly once per run. The events go through ``ctx.emit``, straight to the
    consumer; use :func:`run_child` for them as an async iterator instead.

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
        await emit_all(arch.run(agent, ctx), ctx)
        return
    sid, path = ctx.session_id, ctx.path
    mark = ctx.ledger.mark()  # what the run spends is entered from here on (its RunFailed reports it)
    # the run's own events are never text: sent with the bare emit (ctx.emit only adds the text count)
    await emit(_run_started(session_id=sid, path=path, agent=agent.name, prompt=ctx.prompt))
    try:
        if architecture is None and agent.toolsets:
            # an agent run as itself opens its toolsets (MCP servers) for the run, and closes them with it
            async with open_toolsets(agent):
                await _body(arch, agent, ctx)
        else:
            body = arch.run(agent, ctx)
            if type(body) is types.CoroutineType and active_tracer() is None:
                await body  # the common case, inline: no call between this run and its body
            else:
                await _traced(body, agent, ctx)
    except Exception as exc:
        severity = exc.severity if isinstance(exc, RunError) else None
        log.info("run failed", session_id=sid, path=path, error_type=type(exc).__name__)
        if closing():  # a clean-up failed as the consumer closed the stream: nobody reads events now
            raise
        spent = ctx.ledger.since(mark, path)  # every request of the run and the runs below it, failed ones too
        await emit(
            RunFailed(
                session_id=sid,
                path=path,
                error_type=type(exc).__name__,
                message=shown_message(exc, expose_details=ctx.expose_details),
                severity=severity,
                usage=spent,
            )
        )
        raise
    if ctx.result is None:
        raise RuntimeError(f"architecture {type(arch).__name__} ended without a result")
    await emit(_run_completed(session_id=sid, path=path, result=ctx.result))


def _body(arch: Architecture, agent: Actor, ctx: RunContext) -> Awaitable[None]:
    return _traced(arch.run(agent, ctx), agent, ctx)


def _traced(body: ArchitectureRun, agent: Actor, ctx: RunContext) -> Awaitable[None]:
    """Run ``body`` (see :func:`emit_all`), inside its span when OpenTelemetry is configured."""
    if active_tracer() is not None:
        body = traced_run(events_of(body), agent, ctx)
    return emit_all(body, ctx)


def run_child(
    agent: Actor, ctx: RunContext, *, architecture: Architecture | None = None, announce: bool = True
) -> EventPump[Event]:
    """:func:`execute` with its events as an async iterator, for a caller that inspects them.

    Same arguments as :func:`execute`. The iterator raises the run's exception after its
    ``run.failed`` event; close it (``aclose``) when leaving early.
    """
    return EventPump(execute(agent, ctx, architecture=architecture, announce=announce), EventBase)  # type: ignore[arg-type]
