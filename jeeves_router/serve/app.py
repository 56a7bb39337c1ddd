"""The ASGI app: an OpenAI-compatible chat endpoint, run event streams, sessions, models.

Endpoints (all JSON errors in OpenAI's shape ``{"error": {"message", "type", "param", "code"}}``):

- ``POST /v1/chat/completions`` — OpenAI chat completions, whole or streamed (SSE).
  ``model`` names the served agent; the reply is the text of its run, the same whole or
  streamed (:class:`~jeeves_router.reply.ReplyText`: every agent's text, then the answer if it was not
  streamed, or a stopped run's message for the end user). The routing decision travels
  in the ``jeeves`` extension object of the completion (and of the last streamed chunk):
  ``{"route", "confidence", "fallback_reason", "used_fallback", "status", "session_id"}``,
  and in the ``X-Jeeves-Route``, ``X-Jeeves-Confidence`` and ``X-Jeeves-Fallback-Reason``
  headers (a streamed reply sends them with the routing known at its first token).
  ``session_id`` (a body field, or the ``X-Session-Id`` header) names the conversation: a
  request whose ``messages`` hold only the new user message then continues the session's
  stored history; earlier messages in the request replace it.
- ``POST /v1/runs`` — ``{"model", "input", "session_id"?, "history"?, "force_route"?,
  "context"?}``; streams every typed event as ``event: <kind>`` / ``id: <n>`` /
  ``data: <json>``. It always streams: ``"stream": false`` is refused (400, ``param: "stream"``).
- ``GET /v1/sessions/{id}`` — the session's turns from the journal.
- ``GET /v1/models`` — the served agents; ``GET /v1/models/{id}`` — one of them (404
  ``model_not_found`` for another id).

Retries. ``POST /v1/chat/completions`` and ``POST /v1/runs`` take an ``Idempotency-Key``
header (1-255 printable ASCII characters; a journal is needed, else 400): the key names the
run (:mod:`jeeves_router.journal.keyed`), so a request repeated with the same key and the
same request is answered by the first one's run instead of running again — a completed run
is replayed from the journal (the same answer and ``jeeves`` decision, a stream of the same
text or events; no model or tool is called; the reply carries ``Idempotent-Replayed: true``,
which no other reply has), a run cut off (its server stopped or died; a client that goes
away does not cut a keyed run, see :mod:`.runs`) or failed is resumed from its journaled
steps. While that run is in flight the retry gets 409 with ``Retry-After``; the same key
with another request gets 422. "The same request" is what the run receives: ``model``, the
messages (or ``input`` and ``history``), ``context``, ``force_route`` and the session;
``stream`` and ``stream_options`` may differ (a whole reply can be retried as a stream). A
key is scoped to its session: without a ``session_id`` the session is derived from the key;
with one, the same key in another session names another run.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from .._articles import a_type
from .._limits import (
    DEFAULT_BODY_TIMEOUT_S,
    DEFAULT_MAX_REQUEST_BYTES,
    DEFAULT_SEND_TIMEOUT_S,
    check_body_timeout,
    check_limit,
    check_seconds,
)
from .._models_held import aclose_models
from .._slots import DEFAULT_MAX_CONCURRENCY, Slots, check_max_concurrency
from ..agent import Agent
from ..errors import UsageError
from ..ids import SESSION_ID, SESSION_ID_RULE
from ..journal import Journal
from ..journal.attach import DEFAULT_HISTORY, journal_agents, open_journal
from ..journal.sessions import SessionHistory, session_turns
from .guard import BearerAuth, BodyLimit, Drain, check_token, idempotency_key, take_slot
from .runs import chat_reply, events_reply
from .wire import ApiError, parse_chat, parse_json, parse_run

__all__ = ["DEFAULT_HISTORY", "create_app", "open_journal", "served_agents"]

log = logging.getLogger("jeeves_router.serve")

Handler = Callable[[Request], Awaitable[Response]]


def served_agents(agents: Agent | Sequence[Agent] | Mapping[str, Agent]) -> dict[str, Agent]:
    """The agents to serve, by model id (the agent's name unless a mapping gives another)."""
    if isinstance(agents, Agent):
        agents = [agents]
    if isinstance(agents, (str, bytes)) or not isinstance(agents, (Sequence, Mapping)):
        raise UsageError(f"serve an Agent, a list or a mapping of agents, not {a_type(agents)}")
    pairs = (
        list(agents.items())
        if isinstance(agents, Mapping)
        else [(getattr(a, "name", f"#{i}"), a) for i, a in enumerate(agents)]
    )
    for name, agent in pairs:
        if not isinstance(agent, Agent):
            raise UsageError(f"served model {name!r} must be an Agent, not {a_type(agent)}")
    table = dict(pairs)
    if not table:
        raise UsageError("serve at least one agent")
    if not isinstance(agents, Mapping) and len(table) != len(agents):
        raise UsageError("two served agents have the same name; serve a mapping {model id: agent} instead")
    return table


def _api(handler: Handler) -> Handler:
    """Turn :class:`ApiError` into its reply and any other failure into a bare 500."""

    async def endpoint(request: Request) -> Response:
        try:
            return await handler(request)
        except ApiError as err:
            return JSONResponse(err.body(), status_code=err.status, headers=err.headers)
        except Exception as exc:  # never send a traceback or an exception's text
            log.error("request failed", extra={"path": request.url.path, "error_type": type(exc).__name__})
            bug = ApiError(500, f"internal error ({type(exc).__name__})", code="internal_error", type="server_error")
            return JSONResponse(bug.body(), status_code=500)

    return endpoint


def create_app(
    agents: Agent | Sequence[Agent] | Mapping[str, Agent],
    *,
    token: str | None = None,
    journal: Journal | str | os.PathLike[str] | None = None,
    session_history: SessionHistory | None = DEFAULT_HISTORY,
    max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S,
    send_timeout_s: float = DEFAULT_SEND_TIMEOUT_S,
    retry_after_s: int = 1,
    drain: Drain | None = None,
) -> ASGIApp:
    """An ASGI app serving ``agents`` (see the module docs for the endpoints).

    Args:
        agents: An agent, a list of agents (model id: the agent's name) or a mapping
            ``{model id: agent}``.
        token: Require ``Authorization: Bearer <token>`` on every request.
        journal: A journal, a SQLite file path or a ``postgresql://`` URL, for sessions: agents without a runtime
            get ``JournalRuntime(journal, session_history=session_history)``. Agents that
            already have a ``JournalRuntime`` keep it (and their sessions are served too).
        session_history: History limits for the runtimes this creates (``None``: a
            request sees only the history it sends).
        max_concurrency: Runs in flight at once; more are refused with 429 and ``Retry-After``
            (:class:`jeeves_router._slots.Slots`, the MCP server's limit too).
        max_request_bytes: Larger request bodies are refused with 413 (:class:`~.guard.BodyLimit`; the
            CLI's ``--max-request-bytes``).
        body_timeout_s: A request body not received whole within this many seconds of the
            request's headers is refused with 408 and its connection closed (the CLI's
            ``--body-timeout``).
        send_timeout_s: A streamed reply whose client has taken none of it for this many seconds
            (one write waited that long: the client stopped reading but kept its connection) is
            dropped as a client that disconnected: its run is cancelled (a keyed one goes on), its
            slot released, its connection closed (the CLI's ``--send-timeout``).
        retry_after_s: The ``Retry-After`` of a 429.
        drain: Shutdown control shared with the server (:func:`~jeeves_router.serve.serve`
            passes one; by default the app makes its own).

    When the app stops (its lifespan ends), it closes the journals in use and the HTTP
    clients the served agents' models built (:func:`jeeves_router._models_held.aclose_models`;
    a client passed to a model as ``client=`` stays open).

    Raises:
        UsageError: for bad arguments (naming the argument: :attr:`UsageError.argument`).
    """
    table = served_agents(agents)
    check_max_concurrency("max_concurrency", max_concurrency)
    check_limit("max_request_bytes", max_request_bytes)
    check_body_timeout("body_timeout_s", body_timeout_s)
    check_seconds("send_timeout_s", send_timeout_s, DEFAULT_SEND_TIMEOUT_S)
    check_token(token)
    journals = journal_agents(table, journal, session_history)  # as `jeeves-router mcp --journal` does
    slots = Slots(max_concurrency)
    drain = drain if drain is not None else Drain()

    def agent_for(model: str) -> Agent:
        agent = table.get(model)
        if agent is None:
            msg = f"unknown model {model!r}; this server serves {sorted(table)}"
            raise ApiError(404, msg, param="model", code="model_not_found")
        return agent

    async def start(request: Request, parse: Any, reply: Any) -> Response:
        """Parse the body, find the agent, take a run slot; the reply releases the slot when it ends."""
        req = parse(parse_json(await request.body()), session_header=_sid_header(request))  # within BodyLimit
        agent = agent_for(req.model)
        key = idempotency_key(request, agent)
        if key is not None:
            req = dataclasses.replace(req, idempotency_key=key)
        drain.check()
        take_slot(slots, retry_after_s)
        try:
            response: Response = reply(agent, req, slots.release, drain, retry_after_s, send_timeout_s=send_timeout_s)
            return response
        except BaseException:
            slots.release()
            raise

    async def chat(request: Request) -> Response:
        return await start(request, parse_chat, chat_reply)

    async def runs(request: Request) -> Response:
        return await start(request, parse_run, events_reply)

    async def session(request: Request) -> Response:
        sid = request.path_params["session_id"]
        if not SESSION_ID.fullmatch(sid):
            raise ApiError(400, f"malformed session id in the path: {SESSION_ID_RULE}", param="session_id")
        if not journals:
            raise ApiError(404, "this server keeps no sessions: start it with a journal", code="no_journal")
        for j in journals:
            turns = await session_turns(j, sid)
            if turns:
                return JSONResponse({"object": "session", "id": sid, "turns": [t.as_dict() for t in turns]})
        raise ApiError(404, f"no session {sid!r} in the journal", param="session_id", code="session_not_found")

    async def models(request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [_model_object(m) for m in table]})

    async def model(request: Request) -> Response:
        model_id = request.path_params["model_id"]
        agent_for(model_id)  # 404 model_not_found for an id this server does not serve
        return JSONResponse(_model_object(model_id))

    async def http_error(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        message = {404: f"no endpoint {request.url.path}", 405: f"method {request.method} not allowed here"}
        err = ApiError(status, message.get(status, "request refused"))
        return JSONResponse(err.body(), status_code=status, headers=getattr(exc, "headers", None))

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with AsyncExitStack() as closing:  # journals, model clients: also when the server stops on an error
            for j in journals:
                closing.push_async_callback(j.aclose)
            closing.push_async_callback(aclose_models, table.values())  # the clients built on this server's loop
            yield

    app = Starlette(
        routes=[
            Route("/v1/chat/completions", _api(chat), methods=["POST"]),
            Route("/v1/runs", _api(runs), methods=["POST"]),
            Route("/v1/sessions/{session_id}", _api(session), methods=["GET"]),
            Route("/v1/models", _api(models), methods=["GET"]),
            Route("/v1/models/{model_id:path}", _api(model), methods=["GET"]),
        ],
        exception_handlers={HTTPException: http_error},
        middleware=[Middleware(BodyLimit, limit=max_request_bytes, timeout_s=body_timeout_s)],
        lifespan=lifespan,
    )
    app.state.slots = slots
    return BearerAuth(app, token) if token is not None else app


def _model_object(model_id: str) -> dict[str, Any]:
    """OpenAI's model object for a served agent, as ``GET /v1/models`` lists it."""
    return {"id": model_id, "object": "model", "created": 0, "owned_by": "jeeves-router"}


def _sid_header(request: Request) -> str | None:
    return request.headers.get("x-session-id")
