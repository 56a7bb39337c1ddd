"""What stands in front of every run: bearer-token auth, the body limit, the concurrency limit, the idempotency key.

The auth check and the body limit (:class:`BodyLimit`) are pure ASGI middlewares (neither
buffers a reply); the token is compared in constant time with :func:`hmac.compare_digest` and
never logged. Both HTTP fronts use them: ``jeeves-router serve`` and the MCP server over streamable HTTP
(``jeeves-router mcp --transport http``), with the same token checks
(:func:`check_token`, :func:`check_host`, :func:`token_from_env`).

The concurrency limit is :class:`jeeves_router._slots.Slots`, shared with the MCP server; here a
run over it is refused with 429 (:func:`take_slot`).
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import socket
from typing import TYPE_CHECKING

import anyio
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .._env import secret_from_env
from .._limits import DEFAULT_BODY_TIMEOUT_S, too_large
from .._slots import Slots
from ..errors import UsageError
from ..ids import check_idempotency_key
from ..runtime import journal_advice
from .wire import ApiError

if TYPE_CHECKING:
    from ..agent import Agent

__all__ = [
    "IDEMPOTENCY_HEADER",
    "BearerAuth",
    "BodyLimit",
    "Drain",
    "check_host",
    "check_listen",
    "check_token",
    "idempotency_key",
    "is_loopback",
    "send_error",
    "take_slot",
    "token_from_env",
]

log = logging.getLogger("jeeves_router.serve")


async def send_error(send: Send, err: ApiError) -> None:
    """Send ``err`` as a complete JSON reply (compact, as every other reply's JSON)."""
    body = json.dumps(err.body(), separators=(",", ":")).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.lower().encode(), v.encode()) for k, v in err.headers.items()]
    await send({"type": "http.response.start", "status": err.status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_token(token: str | None) -> None:
    """Refuse a token too short to guard anything (``None``, no token, passes).

    Raises:
        UsageError: if ``token`` is not a string of at least 8 characters.
    """
    if token is not None and (not isinstance(token, str) or len(token) < 8):
        raise UsageError("token must be a string of at least 8 characters")


def check_listen(host: str, port: object) -> None:
    """Refuse, in one line, an address the server could not listen on, before uvicorn starts.

    uvicorn reports a port in use (or out of range, or a host that is no local address) with
    its own log lines and a traceback or exit status 3; the address is bound here once first,
    as uvicorn binds it (``SO_REUSEADDR``), and released.

    Raises:
        UsageError: for a port that is not an integer in 0-65535, or an address that cannot be bound.
    """
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise UsageError(f"port must be an integer within 0-65535 (0: any free port), got {port!r}", argument="port")
    if port == 0:
        return
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError as exc:
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def check_host(host: str, token: str | None, *, command: str) -> None:
    """Refuse to listen on a non-loopback ``host`` without a token, in one line.

    Args:
        host: The address the server would listen on.
        token: The bearer token every request must carry, if any.
        command: The CLI command that sets a token (``"serve"``, ``"mcp"``), for the message.

    Raises:
        UsageError: for a non-loopback host without a token.
    """
    if not is_loopback(host) and not token:
        raise UsageError(
            f"refusing to listen on {host!r} without a token: anyone who can reach it could run your agents; "
            f"set a token (jeeves-router {command} --token-env VAR) or listen on 127.0.0.1"
        )


def token_from_env(name: str | None) -> str | None:
    """The token held by environment variable ``name`` (``None`` when no name is given).

    Raises:
        UsageError: if the variable is unset or empty.
    """
    return secret_from_env(name, option="--token-env")


class BearerAuth:
    """Refuse HTTP requests without ``Authorization: Bearer <token>`` (401, OpenAI error shape)."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._token = token.encode()

    def _ok(self, scope: Scope) -> bool:
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                scheme, _, given = value.partition(b" ")
                return scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), self._token)
        return False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass authorised HTTP requests (and every lifespan message) on to the app."""
        if scope["type"] == "http" and not self._ok(scope):
            log.info("refused a request without a valid bearer token", extra={"path": scope.get("path")})
            err = ApiError(
                401,
                "missing or invalid bearer token: send 'Authorization: Bearer <token>'",
                code="invalid_api_key",
                headers={"www-authenticate": "Bearer"},
            )
            await send_error(send, err)
            return
        await self.app(scope, receive, send)


def take_slot(slots: Slots, retry_after_s: int) -> None:
    """Take a run slot of ``slots`` (:mod:`jeeves_router._slots`, the MCP server's too), or refuse the run.

    Raises:
        ApiError: 429 carrying ``Retry-After: retry_after_s`` when every slot is taken.
    """
    if not slots.acquire():
        raise ApiError(
            429,
            f"{slots.busy}; retry after {retry_after_s} s",
            code="rate_limit_exceeded",
            type="rate_limit_error",
            headers={"retry-after": str(retry_after_s)},
        )


class BodyLimit:
    """Refuse (OpenAI error shape) an HTTP request whose body is over ``limit`` bytes (413), or too slow (408).

    The one body reader of both HTTP fronts (``max_request_bytes`` and ``body_timeout_s`` of
    ``create_app`` and of the MCP server over streamable HTTP). A declared ``Content-Length``
    over the limit is refused before anything is read; a body sent without one (chunked) is read
    up to the limit. A body not received whole within ``timeout_s`` seconds of the request's
    headers is refused with 408 and the connection closed (uvicorn bounds neither: a client
    trickling its body would hold its connection and task for as long as it likes). The app is
    handed the body read whole, as one message; its later ``receive`` calls (a disconnect) go to
    the connection.
    """

    def __init__(self, app: ASGIApp, limit: int, timeout_s: float = DEFAULT_BODY_TIMEOUT_S) -> None:
        self.app = app
        self.limit = limit
        self.timeout_s = timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Read the body within the limit, then pass the request on (every lifespan message too)."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        read = await self._read(scope, receive)
        if read is None:  # the client left before it sent its body: nobody to answer
            return
        if isinstance(read, ApiError):
            await send_error(send, read)
            return
        body: list[Message] = [{"type": "http.request", "body": read, "more_body": False}]

        async def read_body() -> Message:
            return body.pop() if body else await receive()

        await self.app(scope, read_body, send)

    def _too_big(self) -> ApiError:
        """The refusal of a body over the limit (made only for a request refused)."""
        return ApiError(413, too_large(self.limit), code="request_too_large")

    async def _read(self, scope: Scope, receive: Receive) -> bytes | ApiError | None:
        """The whole body; the refusal of one too large or too slow; ``None`` if the client left."""
        for name, value in scope.get("headers", ()):
            if name == b"content-length" and value.isdigit() and int(value) > self.limit:
                return self._too_big()
        parts: list[bytes] = []
        size = 0
        with anyio.move_on_after(self.timeout_s):
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    return None
                part = message.get("body", b"")
                size += len(part)
                if size > self.limit:
                    return self._too_big()
                parts.append(part)
                if not message.get("more_body", False):
                    return b"".join(parts)
        log.info("refused a request whose body was not received in time", extra={"timeout_s": self.timeout_s})
        return ApiError(
            408,
            f"the request body did not arrive within the server's limit of {self.timeout_s:g} seconds of its headers; "
            "send it without pausing",
            code="request_timeout",
            headers={"connection": "close"},  # the rest of the body may still come: nothing reads it
        )


#: The request header that makes a run safe to retry (see :mod:`jeeves_router.serve.app`).
IDEMPOTENCY_HEADER = "Idempotency-Key"


#: How a server gives its agents a journal (what a plain agent's refusal of a key tells the client).
SERVER_JOURNAL = "start the server with --journal (create_app(journal=...))"


def idempotency_key(request: Request, agent: Agent) -> str | None:
    """The request's ``Idempotency-Key``, checked (``None``: no header).

    Args:
        request: The request.
        agent: The agent it is for (only a runtime that records runs can find the run a key names).

    Raises:
        ApiError: 400 for a key that is not 1-255 printable ASCII characters, or a key sent
            to an agent whose runtime cannot honour it (the message is the runtime's advice,
            :meth:`~jeeves_router.runtime.Runtime.without_journal`).
    """
    value = request.headers.get(IDEMPOTENCY_HEADER)
    if value is None:
        return None
    try:
        check_idempotency_key(value)
    except UsageError:
        msg = f"the {IDEMPOTENCY_HEADER} header must be 1-255 printable ASCII characters"
        raise ApiError(400, msg, param=IDEMPOTENCY_HEADER, code="invalid_idempotency_key") from None
    if not getattr(agent.runtime, "honours_idempotency_keys", False):
        raise ApiError(
            400,
            f"the {IDEMPOTENCY_HEADER} header cannot be honoured for agent {agent.name!r}: "
            f"{journal_advice(agent.runtime, SERVER_JOURNAL)}",
            param=IDEMPOTENCY_HEADER,
            code="idempotency_key_needs_journal",
        )
    return value


class Drain:
    """Graceful shutdown of the runs in flight: refuse new ones, cancel the rest on demand.

    :func:`~jeeves_router.serve.serve` calls :meth:`start` when a shutdown signal
    arrives and :meth:`cancel_all` when the grace period is over; each cancelled reply ends
    its response properly (an error chunk for a stream, 503 before any byte was sent).
    """

    def __init__(self) -> None:
        self.draining = False
        self._scopes: set[anyio.CancelScope] = set()

    def __len__(self) -> int:
        return len(self._scopes)

    def check(self) -> None:
        """Refuse a new run (503) once draining started."""
        if self.draining:
            raise ApiError(
                503,
                "the server is shutting down; retry on another instance",
                code="shutting_down",
                type="server_error",
                headers={"retry-after": "1"},
            )

    def start(self) -> None:
        """Stop accepting runs."""
        self.draining = True

    def add(self, scope: anyio.CancelScope) -> None:
        """Track the cancel scope of a run in flight."""
        self._scopes.add(scope)

    def discard(self, scope: anyio.CancelScope) -> None:
        """Forget a finished run."""
        self._scopes.discard(scope)

    def cancel_all(self) -> None:
        """Cancel every run still in flight."""
        if self._scopes:
            log.warning("grace period over; cancelling runs in flight", extra={"runs": len(self._scopes)})
        for scope in list(self._scopes):
            scope.cancel()
