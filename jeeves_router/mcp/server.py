"""Serve an agent (typically a router desk) as an MCP server, so MCP clients can call it.

The server has one tool, ``ask``: the request (and an optional session id) in; the reply
out as text, and the routing decision (route, confidence, fallback, status, session ids,
usage) as structured content (:class:`RoutedAnswer`). The text is the one the HTTP server's
chat reply says for the same run (:class:`~jeeves_router.reply.ReplyText`): every agent's
text in order, also that of an agent that handed the turn on or wrote before a tool call,
then the answer if it was not streamed; ``output`` in the structured content is the
answering agent's last reply alone (:attr:`~jeeves_router.results.RunResult.output`). A run
that ends without an answer (``unresolved``,
``max_turns``, ...) or fails is an error result, so the client's model sees that no answer
came; a failed run is named by its error type only, as over HTTP (an exception's text may
quote a secret). From the command line: ``jeeves-router mcp module:attr`` (stdio) or
``jeeves-router mcp module:attr --transport http --port 8000`` (add ``--token-env VAR`` to
require a bearer token, which a non-loopback ``--host`` needs: the check is
:mod:`jeeves_router.serve`'s own).

Before running, ``ask`` refuses (an error result naming the rule; :mod:`._ask_checks`) an empty or
blank request, one over the HTTP server's size limit (``max_request_bytes``, 1 MiB by default: the
request's UTF-8 bytes; over streamable HTTP the whole request body is held to it first, by the HTTP
server's own :class:`~jeeves_router.serve.guard.BodyLimit`), and arguments that do not fit its schema.
Then it takes a slot of the server's concurrency limit (``max_concurrency``, 64 by default: the HTTP
server's, with the same :class:`~jeeves_router._slots.Slots`), or, when every slot is taken, is an
error result saying the server is busy; a run gives its slot back when it ends (:mod:`._ask_run`).

Retries: a request whose ``_meta`` carries ``"idempotency_key"`` (:data:`IDEMPOTENCY_META`,
1-255 printable ASCII characters) is made as ``agent.run(..., idempotency_key=key)``
(:mod:`jeeves_router.journal.keyed`): an ``ask`` called again with the same key and the same
arguments is answered by the first call's run (a completed run is replayed from the
journal: no model or tool is called again); while that run is in flight, or if the key was
used with other arguments (or the first call's run cannot be replayed: the agent changed since),
the result is an error saying so and nothing runs; each such refusal is logged as over HTTP, in
one INFO line on ``jeeves_router.serve`` (reason, ``tool``, session and run id). A call without
it that carries the key a jeeves MCP client sends with each durable tool call
(``_meta["jeeves-router/idempotency-key"]``, :data:`~jeeves_router.mcp.IDEMPOTENCY_META_KEY`:
the same on every attempt of the call) is made with that key instead, so a jeeves agent that
resumes a run and calls ``ask`` again gets the first call's answer: its desk's tools do not
run twice. That key is honoured only when the agent has a journaling runtime (else it is
ignored: the client sends it unasked), and one that is no valid key (over 255 characters,
not printable ASCII) is mapped to ``"jr-sha256:"`` and its SHA-256 in hex. The agent
needs a journaling runtime: ``jeeves-router mcp module:attr --journal runs.db`` (or a
``postgresql://`` URL; ``serve(agent, journal=...)`` from code) gives an agent without a
runtime ``JournalRuntime(journal, session_history=SessionHistory())``, exactly as
``jeeves-router serve --journal`` does (:func:`jeeves_router.journal.attach.journal_agents`),
so a ``session_id`` also continues the session's stored history; an agent built with a
``JournalRuntime`` keeps it. Without a journal a key is an error result.
A keyed run goes on when its call is cancelled (a client that timed out will call again; a
refund cut mid-call would leave an unknown outcome that fails every retry): it runs in the
server's task group, which only the server's end cuts (:mod:`._ask_run`).

Over stdio the protocol owns stdout, so logs must go to stderr: the library logs through the
standard :mod:`logging` module and is silent unless configured; configure a handler on stderr
(as ``jeeves-router -v`` does), never on stdout.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Annotated, Any, Literal

import anyio
import anyio.abc
from pydantic import BaseModel, Field

from .._articles import a_type
from .._limits import DEFAULT_BODY_TIMEOUT_S, DEFAULT_MAX_REQUEST_BYTES, check_body_timeout, check_limit
from .._models_held import aclose_models
from .._slots import DEFAULT_MAX_CONCURRENCY, Slots, check_max_concurrency
from .._targets import import_target
from ..agent import Agent
from ..errors import ReplayDivergence, UsageError
from ..ids import SESSION_ID, SESSION_ID_RULE
from ..journal.attach import DEFAULT_HISTORY, JournalSpec, journal_agents
from ..journal.keyed import IdempotencyConflict, RunInFlight, log_refused
from ..journal.sessions import SessionHistory
from ..results import RunResult
from ._ask_checks import IDEMPOTENCY_META, ask_tool, client_key, key_problem, meta_of, request_problem
from ._ask_run import asked
from ._link import IDEMPOTENCY_META_KEY

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

__all__ = ["IDEMPOTENCY_META", "RoutedAnswer", "router_server", "serve", "load_agent", "main"]

Transport = Literal["stdio", "http"]


class RoutedAnswer(BaseModel):
    """The structured content of an ``ask`` result: the answer and how it was routed."""

    reply: str | None = Field(
        default=None,
        description=(
            "The text of the reply, as the text content says it: every agent's text in order (also an agent's that "
            "handed the turn on, or wrote before a tool call), then the answer if it was not streamed; null when the "
            "run said nothing."
        ),
    )
    output: str | None = Field(
        description=(
            "The answering agent's last reply alone (after a handoff, the last agent's), or null when the run ended "
            "without one."
        )
    )
    status: str = Field(description="ok, fallback, unresolved, max_turns, critical, ...")
    user_message: str | None = Field(
        default=None, description="For a run that recovery stopped (critical, fatal): the message for the end user."
    )
    route: str | None = Field(default=None, description="The route that answered.")
    confidence: float | None = Field(default=None, description="The classifier's confidence for that route.")
    used_fallback: bool = False
    fallback_reason: str | None = None
    session_id: str
    specialist_session_id: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None


def _answer(result: RunResult, reply: str | None) -> RoutedAnswer:
    return RoutedAnswer(
        reply=reply,
        output=result.output,
        status=result.status,
        user_message=result.user_message,
        route=result.route,
        confidence=result.confidence,
        used_fallback=result.used_fallback,
        fallback_reason=result.fallback_reason,
        session_id=result.session_id,
        specialist_session_id=result.specialist_session_id,
        input_tokens=result.usage.input_tokens,
        output_tokens=result.usage.output_tokens,
        cost_usd=result.usage.cost_usd,
    )


def router_server(
    agent: Agent,
    *,
    name: str | None = None,
    tool_name: str = "ask",
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
) -> MCPServer[Any]:
    """An ``mcp`` server (not started) whose one tool runs ``agent``.

    Args:
        agent: The agent to serve; usually a router desk.
        name: The server's name (default: the agent's name).
        tool_name: The tool's name.
        max_request_bytes: A longer request (in UTF-8 bytes) is an error result and nothing
            runs, as the HTTP server refuses a body over its ``max_request_bytes`` (the same default;
            served over HTTP by :func:`serve`, the whole request body is held to it as well).
        max_concurrency: Runs in flight at once, over every client and session of the server (the
            HTTP server's limit, :class:`jeeves_router._slots.Slots`, with its default); an ``ask``
            beyond it is an error result saying the server is busy, and nothing runs.

    Raises:
        UsageError: if ``agent`` is not an Agent, ``max_request_bytes`` or ``max_concurrency`` is
            no positive integer, or the ``mcp`` package is missing.
    """
    if not isinstance(agent, Agent):
        raise UsageError(f"can only serve an Agent over MCP, got {type(agent).__name__}")
    check_limit("max_request_bytes", max_request_bytes)
    slots = Slots(check_max_concurrency("max_concurrency", max_concurrency))
    try:
        import mcp_types as types
        from mcp.server.mcpserver import Context, MCPServer
    except ImportError as exc:
        raise UsageError("serving over MCP needs the 'mcp' package: pip install 'jeeves-router[mcp]'") from exc

    hosts: list[anyio.abc.TaskGroup] = []  # the server's task group while it runs: keyed runs go on there

    @asynccontextmanager
    async def lifespan(_: object) -> AsyncIterator[dict[str, Any]]:
        async with anyio.create_task_group() as tg:
            hosts.append(tg)
            try:
                yield {}
            finally:
                hosts.remove(tg)
                tg.cancel_scope.cancel()  # the server stops: what still runs is cut (resumable)

    def refused(text: str) -> Any:
        return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)

    async def ask(request: str, session_id: str | None = None, ctx: Context | None = None) -> Any:
        problem = request_problem(request, max_request_bytes)
        if problem is not None:
            return refused(problem)
        if session_id and not SESSION_ID.fullmatch(session_id):  # as over HTTP: GET /v1/sessions/{id} reads it
            return refused(f"{SESSION_ID_RULE}; nothing was run")
        meta = meta_of(ctx)
        key: Any = meta.get(IDEMPOTENCY_META)
        if key is not None:
            problem = key_problem(key, agent)
            if problem is not None:
                return refused(problem)
        else:
            key = client_key(meta.get(IDEMPOTENCY_META_KEY), agent)
        if not slots.acquire():  # as over HTTP (429), refused now rather than queued
            return refused(f"busy: {slots.busy}; nothing was run: call again in a few seconds")
        try:  # the run gives its slot back when it is over (a keyed one may outlive this call)
            host = hosts[-1] if hosts else None
            result, reply = await asked(host, agent, request, session_id or None, key, slots.release)
        except IdempotencyConflict as exc:
            log_refused(exc, "conflict", tool=tool_name)
            return refused(f"the {IDEMPOTENCY_META} was already used with other arguments; nothing was run")
        except RunInFlight as exc:
            log_refused(exc, "in_flight", tool=tool_name)
            return refused(f"the run of this {IDEMPOTENCY_META} is still in flight; call again later for its answer")
        except ReplayDivergence as exc:
            if key is None:  # a strict runtime's own divergence: a failed run
                return refused(f"the run failed ({type(exc).__name__}); see the server log")
            log_refused(exc, "replay_diverged", tool=tool_name)
            return refused(
                f"the run of this {IDEMPOTENCY_META} completed under an agent that has changed since (its "
                "instructions, tools or model), so its answer cannot be replayed; nothing was run: use a new key"
            )
        except Exception as exc:  # its type only, as over HTTP: an exception's text may quote a secret
            return refused(f"the run failed ({type(exc).__name__}); see the server log")
        answer = _answer(result, reply)
        text = reply if result.output is not None and reply is not None else None
        if text is None:
            told = f": {reply}" if reply else ""
            text = f"no answer (status: {result.status}){told}"
        return types.CallToolResult(
            content=[types.TextContent(text=text)],
            structured_content=answer.model_dump(mode="json"),
            is_error=not result.ok,
        )

    # Set explicitly: the SDK reads the hints to build the schemas, and this module's
    # annotations are strings (``from __future__ import annotations``).
    ask.__annotations__ = {
        "request": str,
        "session_id": str | None,
        "ctx": Context | None,
        "return": Annotated[types.CallToolResult, RoutedAnswer],
    }
    description = (
        f"Ask {agent.name!r}: {agent.instructions.strip().splitlines()[0] if agent.instructions.strip() else ''}. "
        "The request is routed to the right specialist; the text is its answer and the structured "
        "content says which route answered and how confident the routing was. A session_id, when "
        "given, files the request under that session (journal, events)."
    )
    return MCPServer(
        name or agent.name,
        instructions=agent.instructions,
        log_level="WARNING",
        lifespan=lifespan,
        tools=[ask_tool(ask, name=tool_name, description=description)],
    )


async def serve(
    agent: Agent,
    *,
    transport: Transport = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    path: str = "/mcp",
    token: str | None = None,
    journal: JournalSpec | None = None,
    session_history: SessionHistory | None = DEFAULT_HISTORY,
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S,
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
) -> None:
    """Serve ``agent`` over MCP until cancelled (stdio) or the HTTP server stops.

    Args:
        agent: The agent (router) to serve.
        transport: ``"stdio"`` or ``"http"`` (streamable HTTP).
        host: HTTP only: the interface to listen on; a non-loopback address needs ``token``.
        port: HTTP only: the port.
        path: HTTP only: the endpoint path.
        token: HTTP only: the bearer token every request must carry (``Authorization: Bearer
            <token>``, checked as by ``jeeves-router serve``: in constant time, never logged).
        journal: A journal, a SQLite file path or a ``postgresql://`` URL: an agent without a
            runtime gets ``JournalRuntime(journal, session_history=session_history)``, as
            :func:`jeeves_router.serve.create_app` gives it (idempotency keys and sessions
            then work). The journals in use, and the HTTP clients the agent tree's models
            built, are closed when serving stops (a client passed as ``client=`` stays open).
        session_history: History limits for the runtime this creates (``None``: a request
            sees only its own text).
        max_request_bytes: The size limit on a request, as ``jeeves-router serve`` keeps it
            (1 MiB by default): over HTTP a larger request body gets 413 before anything reads
            it (:class:`~jeeves_router.serve.guard.BodyLimit`, the HTTP server's own); over
            stdio, an ``ask`` whose request is longer (UTF-8 bytes) is an error result.
        body_timeout_s: HTTP only: a request body not received whole within this many seconds
            gets 408 (:class:`~jeeves_router.serve.guard.BodyLimit`, as ``jeeves-router serve``).
        max_concurrency: Runs in flight at once, as ``jeeves-router serve`` limits them (64 by
            default); a further ``ask`` is an error result saying the server is busy (:func:`router_server`).

    Raises:
        UsageError: for an unknown transport, a token on stdio, a short token, a
            non-loopback ``host`` without a token, a ``max_request_bytes`` or ``max_concurrency``
            that is no positive integer, a ``body_timeout_s`` that is no number > 0, or a
            ``journal`` for an agent that has another runtime.
    """
    if transport not in ("stdio", "http"):
        raise UsageError(f"transport must be 'stdio' or 'http', got {transport!r}")
    check_limit("max_request_bytes", max_request_bytes)
    check_max_concurrency("max_concurrency", max_concurrency)
    check_body_timeout("body_timeout_s", body_timeout_s)
    if transport == "stdio" and token is not None:
        raise UsageError("a token guards the HTTP transport only; stdio is reached through its process")
    if transport == "http":
        from ..serve.guard import check_host, check_listen, check_token

        check_token(token)
        check_host(host, token, command="mcp --transport http")
        check_listen(host, port)
    async with AsyncExitStack() as closing:  # every journal in use and the models' clients, however serving ends
        for used in journal_agents({agent.name: agent}, journal, session_history):
            closing.push_async_callback(used.aclose)
        closing.push_async_callback(aclose_models, [agent])
        server = router_server(agent, max_request_bytes=max_request_bytes, max_concurrency=max_concurrency)
        if transport == "stdio":
            await server.run_stdio_async()
        else:
            await _serve_http(server, host, port, path, token, max_request_bytes, body_timeout_s)


async def _serve_http(
    server: MCPServer[Any],
    host: str,
    port: int,
    path: str,
    token: str | None,
    max_request_bytes: int,
    body_timeout_s: float,
) -> None:
    import uvicorn

    from ..serve.guard import BearerAuth, BodyLimit

    mcp_app = server.streamable_http_app(streamable_http_path=path, host=host)
    app = BodyLimit(mcp_app, max_request_bytes, body_timeout_s)
    guarded = BearerAuth(app, token) if token is not None else app
    config = uvicorn.Config(guarded, host=host, port=port, log_level="warning", access_log=False)
    await uvicorn.Server(config).serve()


def load_agent(spec: str, *, option: str = "AGENT") -> Agent:
    """Import ``module:attr`` (from the current directory too): an Agent, or a function making one.

    ``option`` is what the spec was given as, for the messages (the command line's ``TARGET``).

    Raises:
        UsageError: if it cannot be imported or is not an Agent.
    """
    obj = import_target(spec, option=option, example="examples.serve_desk:desk")
    if not isinstance(obj, Agent):
        raise UsageError(f"{option} {spec!r} is {a_type(obj)}, not an Agent (or a function returning one)")
    return obj


def main(
    spec: str,
    *,
    transport: Transport = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    token: str | None = None,
    journal: str | None = None,
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S,
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    option: str = "AGENT",
) -> None:
    """The ``jeeves-router mcp`` command: load ``spec`` and serve it (logs go to stderr).

    ``option`` is what ``spec`` was given as, for the messages (see :func:`load_agent`).
    """
    import anyio

    check_limit("max_request_bytes", max_request_bytes)  # before the agent's module is imported
    check_body_timeout("body_timeout_s", body_timeout_s)
    check_max_concurrency("max_concurrency", max_concurrency)
    agent = load_agent(spec, option=option)
    options: dict[str, Any] = {"token": token, "journal": journal, "max_request_bytes": max_request_bytes}
    options.update(body_timeout_s=body_timeout_s, max_concurrency=max_concurrency)
    anyio.run(lambda: serve(agent, transport=transport, host=host, port=port, **options))
