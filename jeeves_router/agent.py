"""The Agent: instructions, a model, tools and an architecture; run or stream requests."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Mapping, Sequence
from typing import Any

import anyio

from ._aio import EventPump
from ._args import check_agent_options, history_messages, listed
from ._run_stream import RunStream
from ._text import valid_text
from .architectures.base import Architecture, RunContext, emit_each, execute, new_context, run_child
from .architectures.react import ToolLoop
from .errors import UsageError
from .events import Event
from .ids import check_idempotency_key, keyed_session_id, new_session_id, validate_route_name
from .messages import Message
from .models.base import Model
from .models.registry import check_model, resolve_model
from .results import RunResult
from .runtime import PASS_THROUGH, Runtime, journal_advice
from .tools import Tool, Toolset, as_tool, split_toolsets

__all__ = ["Agent", "RunStream"]


class Agent:
    """A model with instructions, tools and an architecture.

    Args:
        instructions: The system prompt (for a router agent: a description of the desk).
        name: A name used in route paths and events (letters/digits joined by '-' or '_').
        model: A :class:`~jeeves_router.models.Model` or a ``"provider:model"`` string,
            its form checked here and resolved at first use. A router agent's model is its classifier's model.
            The adapter resolved from a string is the agent's; it builds its HTTP client on
            its first call, on that call's event loop, and closes it when that loop shuts down
            (a call on another loop builds a new one). ``jeeves-router serve`` / ``mcp`` close
            it when they stop; to close it earlier, call ``aclose()`` of :meth:`resolved_model`.
        tools: Tools the model may call (functions are wrapped with ``@tool``), and
            toolsets such as MCP servers (:mod:`jeeves_router.mcp`), opened for each run.
        architecture: How requests are handled; default: :class:`ToolLoop`.
        max_turns: Bound on model turns of the tool loop.
        temperature: Sampling temperature for this agent's turns (``None``: model default).
        max_tokens: Output cap per model turn (``None``: adapter default).
        runtime: Durability port (default: pass-through, nothing recorded).
        handoffs: Agents (or agent names, for cycles) this one may hand the conversation to
            with generated ``transfer_to_<name>`` tools; without ``architecture``, or with a
            :class:`ToolLoop` (then each turn's loop, e.g. with recovery), the agent runs as a
            :class:`~jeeves_router.architectures.handoffs.chain.HandoffChain`.
        classify_error: Optional hook ``(exc, context) -> ErrorClassification | None``
            used by the recovery layer (a RETRIABLE answer is not followed once text reached
            the consumer, nor for a model call its adapter gave up on: the report's
            ``not_retried`` says why; :mod:`jeeves_router.recovery.classify`).

    Example:
        >>> from jeeves_router import Agent
        >>> from jeeves_router.testing import ScriptedModel
        >>> billing = Agent("You resolve payments.", name="billing", model=ScriptedModel(["Refunded."]))
        >>> result = billing.run_sync("I was charged twice")
        >>> result.status, result.output
        ('ok', 'Refunded.')
    """

    def __init__(
        self,
        instructions: str,
        *,
        name: str = "agent",
        model: Model | str | None = None,
        tools: Iterable[Tool | Toolset | Callable[..., Any]] = (),
        architecture: Architecture | None = None,
        max_turns: int = 10,
        temperature: float | None = None,
        max_tokens: int | None = None,
        runtime: Runtime | None = None,
        handoffs: Sequence[Agent | str] = (),
        classify_error: Callable[..., Any] | None = None,
    ) -> None:
        if not isinstance(instructions, str):
            raise UsageError(f"Agent instructions must be a string, got {type(instructions).__name__}")
        validate_route_name(name, what="agent name")
        if not isinstance(max_turns, int) or max_turns < 1:
            raise UsageError(f"max_turns must be a positive integer, got {max_turns!r}")
        check_agent_options(name, architecture, temperature, max_tokens, runtime, classify_error)
        self.instructions = instructions
        self.name = name
        self.model = model
        check_model(model, what=f"model of agent {name!r}")  # a typo fails here; the SDK loads at first use
        self._model: Model | None = None if isinstance(model, str) or model is None else resolve_model(model)
        plain, self.toolsets = split_toolsets(tools)  # toolsets: MCP servers, opened per run
        tool_list = [as_tool(t) for t in plain]
        self.tool_map: dict[str, Tool] = {}
        for t in tool_list:
            if t.name in self.tool_map:
                raise UsageError(f"agent {name!r} has two tools named {t.name!r}; give one a different name")
            self.tool_map[t.name] = t
        self.tools = tuple(tool_list)
        if handoffs and (architecture is None or isinstance(architecture, ToolLoop)):
            from .architectures.handoffs.chain import HandoffChain  # loaded only by agents with handoffs

            # follows the generated transfer_to_<agent> calls; a ToolLoop given (e.g. with recovery) runs each turn
            architecture = HandoffChain(architecture)
        self.architecture: Architecture = architecture if architecture is not None else ToolLoop()
        self.max_turns = max_turns
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.runtime = runtime or PASS_THROUGH
        self.handoffs = tuple(listed(handoffs, what="handoffs", example="handoffs=[billing]"))
        self.classify_error = classify_error
        self.architecture.validate(self)

    def __repr__(self) -> str:
        model = self._model.name if self._model is not None else self.model
        return f"Agent(name={self.name!r}, model={model!r}, architecture={type(self.architecture).__name__})"

    def resolved_model(self) -> Model:
        """This agent's model, resolving a ``"provider:model"`` string on first use."""
        if self._model is None:
            self._model = resolve_model(self.model, what=f"model of agent {self.name!r}")
        return self._model

    def graph(self) -> str:
        """This agent's tree (routes, handoffs, capabilities) as a Mermaid flowchart; see :mod:`jeeves_router.graph`."""
        from .graph import agent_graph  # the graph module reads the architectures; import it on use

        return agent_graph(self).mermaid()

    # -- running -------------------------------------------------------------------------

    def _context(
        self,
        prompt: str,
        session_id: str | None,
        history: Sequence[Message] | None,
        context: Mapping[str, Any] | None,
        force_route: str | None,
        options: Mapping[str, Any] | None,
        idempotency_key: str | None = None,
    ) -> RunContext:
        if not isinstance(prompt, str):
            raise UsageError(f"prompt must be a string, got {type(prompt).__name__}")
        if session_id is not None and (not isinstance(session_id, str) or not session_id):
            raise UsageError(f"session_id must be a non-empty string, got {session_id!r}")
        if idempotency_key is not None:
            check_idempotency_key(idempotency_key)
            if not getattr(self.runtime, "honours_idempotency_keys", False):
                raise UsageError(
                    f"agent {self.name!r} cannot honour an idempotency key: {journal_advice(self.runtime)}"
                )
            session_id = session_id or keyed_session_id(idempotency_key)
        for name, given in (("context", context), ("options", options)):
            if given is not None and not isinstance(given, Mapping):
                raise UsageError(f"{name} must be a mapping (a dict of names to values), got {type(given).__name__}")
        ctx = new_context(
            agent=self,
            session_id=session_id or new_session_id(),
            path=(self.name,),
            prompt=valid_text(prompt),  # a cut emoji's half becomes U+FFFD (see _text)
            history=history_messages(history),
            context=dict(context) if context else {},
            runtime=self.runtime,
            force_route=force_route,
            options=dict(options) if options else {},
            idempotency_key=idempotency_key,
        )
        prepare = getattr(self.architecture, "prepare", None)
        if prepare is not None:
            prepare(self, ctx)
        return ctx

    def _events(self, ctx: RunContext) -> EventPump[Event]:
        """All events of one root run of this agent; sets ``ctx.result``; re-raises failures."""
        return RunStream(self, ctx)

    def _root(self, ctx: RunContext) -> Coroutine[Any, Any, None]:
        """The root run of ``ctx`` as a coroutine emitting its events (for an :class:`EventPump`)."""
        observe = getattr(ctx.runtime, "observe_run", None)
        if observe is not None:  # a durable runtime observes root runs (a journal records them and sets run_id)
            observed: AsyncIterator[Event] = observe(ctx, run_child)
            return emit_each(observed, ctx)
        return execute(self, ctx)

    async def _drain(self, ctx: RunContext) -> RunResult:
        events = self._events(ctx)
        try:
            await events.drain()
        finally:
            await events.aclose()
        assert ctx.result is not None
        return ctx.result

    async def run(
        self,
        prompt: str,
        *,
        session_id: str | None = None,
        history: Sequence[Message] | None = None,
        context: Mapping[str, Any] | None = None,
        force_route: str | None = None,
        options: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> RunResult:
        """Handle one request and return its result.

        Args:
            prompt: The request text. Text that is not valid Unicode (an unpaired UTF-16
                surrogate: half of an emoji), here or in the history's text parts, is
                repaired: each unpaired surrogate becomes U+FFFD.
            session_id: Session id (a fresh one when omitted). Routed specialists run under
                ``child_session_id(session_id, route)``.
            history: Earlier conversation turns.
            context: Context variables for tools and context-aware routing (never mutated).
            force_route: Router only: skip classification and dispatch to this route, named
                as route names match everywhere (case and ``-``/``_``/space alike; a
                ``UsageError`` for an agent without routes or a name outside its routes).
            options: Architecture-specific per-run options: ``reset_sticky`` (Router, handoff
                chain), ``bypass_selection`` (Capabilities); a key the agent's architecture
                does not read is a ``UsageError``.
            idempotency_key: Make the request safe to retry (journaling runtimes only): the key
                names the run, so a request repeated with the same key answers from the first
                one's run instead of running again (see :mod:`jeeves_router.journal.keyed`).
                Without a ``session_id`` the session is derived from the key.

        Raises:
            UsageError: for bad arguments (e.g. an unknown ``force_route``, a malformed
                ``idempotency_key``, or a key for a runtime that does not journal).
            IdempotencyConflict: the key was used for another request.
            RunInFlight: the run of the key is running now.
            Exception: a failure inside the run, with its original type.
        """
        ctx = self._context(prompt, session_id, history, context, force_route, options, idempotency_key)
        return await self._drain(ctx)

    def stream(
        self,
        prompt: str,
        *,
        session_id: str | None = None,
        history: Sequence[Message] | None = None,
        context: Mapping[str, Any] | None = None,
        force_route: str | None = None,
        options: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> RunStream:
        """Handle one request, yielding typed events as they happen.

        Use ``async for ev in agent.stream(p)`` or ``async with agent.stream(p) as events``.
        A failed run yields its ``run.failed`` event, then raises the failure from the
        iteration, exactly as :meth:`run` raises it (also kept in :attr:`RunStream.error`).
        ``idempotency_key`` is :meth:`run`'s; a refused key (a conflict, a run in flight) is
        raised from the iteration before any event.
        """
        ctx = self._context(prompt, session_id, history, context, force_route, options, idempotency_key)
        return RunStream(self, ctx)

    def run_sync(self, prompt: str, **kwargs: Any) -> RunResult:
        """:meth:`run` from synchronous code (starts an event loop; not from inside one).

        Raises:
            UsageError: when called while an event loop runs in this thread (an ``async def``,
                a notebook): ``await agent.run(...)`` there instead.
        """
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # no loop running here: the one case run_sync is for
            return anyio.run(functools.partial(self.run, prompt, **kwargs))
        raise UsageError(
            f"agent {self.name!r}: run_sync() cannot start an event loop inside the one already running "
            "in this thread (an async function, a notebook); use `await agent.run(...)` there"
        )

    async def resume(self, session_id: str, *, run_id: str | None = None) -> RunResult:
        """Finish or replay a recorded run of ``session_id`` from this agent's journal.

        The only way a run is served from the journal (:meth:`run` always runs live). The
        run is started again under its recorded run id with the prompt, history, context
        and options recorded at its start; every step already in the journal is served
        from it (no model call is repeated) and the rest runs live. A session whose run
        completed is replayed from the journal and gives the same result with no model
        call. Tool calls interrupted by the crash follow the runtime's
        ``on_unknown_tool_outcome`` policy.

        Args:
            session_id: The session to resume.
            run_id: Which recorded run (default: the last unfinished one, else the last one).

        Raises:
            UsageError: if this agent's runtime does not journal (use
                ``JournalRuntime``), or the session has no recorded run of this agent.
        """
        point_of = getattr(self.runtime, "resume_point", None)
        if point_of is None:
            raise UsageError(f"agent {self.name!r} cannot resume: {journal_advice(self.runtime)}")
        point = await point_of(self, session_id, run_id)
        ctx = self._context(point.prompt, session_id, point.history, point.context, point.force_route, point.options)
        ctx.resume_run = point.run_id
        return await self._drain(ctx)
