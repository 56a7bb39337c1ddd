"""What every front door refuses before it runs anything: a request over the size limit, or an empty one.

One rule for the HTTP server and the MCP server: a request with no text (empty or blank: the
last user message of a chat completion, a run's ``input``, an ``ask``'s ``request``) is refused
(:func:`blank`, :data:`EMPTY_REQUEST`), and so is one over the size limit.

Over HTTP (``jeeves-router serve``, ``jeeves-router mcp --transport http``) the limit counts the
whole request body (:class:`jeeves_router.serve.guard.BodyLimit`, 413 beyond it); over stdio,
where a request has no body of its own, the MCP ``ask`` tool counts its request's UTF-8 bytes.
Over HTTP the body must also arrive within a time limit (:data:`DEFAULT_BODY_TIMEOUT_S`, 408 after it),
and ``jeeves-router serve``'s streamed reply must be taken by its reader: a write not accepted within
:data:`DEFAULT_SEND_TIMEOUT_S` drops the client (:class:`jeeves_router.serve.runs.RunReply`).
"""

from __future__ import annotations

from .errors import UsageError, argument_named

__all__ = [
    "DEFAULT_BODY_TIMEOUT_S",
    "DEFAULT_MAX_REQUEST_BYTES",
    "EMPTY_REQUEST",
    "blank",
    "DEFAULT_SEND_TIMEOUT_S",
    "check_body_timeout",
    "check_limit",
    "check_seconds",
    "too_large",
]

#: The refusal of a request without text (each front door says where it looked).
EMPTY_REQUEST = "the request is empty: send the text to ask"

#: The default limit on a request, in bytes (1 MiB): ``create_app(max_request_bytes=...)``,
#: ``router_server(max_request_bytes=...)``, ``mcp.server.serve(max_request_bytes=...)`` and the
#: ``--max-request-bytes`` of ``jeeves-router serve`` and ``jeeves-router mcp``.
DEFAULT_MAX_REQUEST_BYTES = 1_048_576

#: How long an HTTP request's body may take to arrive, in seconds, from its headers: the
#: ``body_timeout_s=`` of ``create_app`` and ``mcp.server.serve``, the ``--body-timeout`` of
#: ``jeeves-router serve`` and ``jeeves-router mcp --transport http``; later, 408.
DEFAULT_BODY_TIMEOUT_S = 30.0

#: How long one write of a reply may wait for its reader, in seconds (nginx's ``send_timeout``):
#: the ``send_timeout_s=`` of ``create_app``, the ``--send-timeout`` of ``jeeves-router serve``;
#: a reader that takes no data for longer is dropped, as a client that disconnected.
DEFAULT_SEND_TIMEOUT_S = 60.0


def check_limit(name: str, value: object) -> int:
    """``value``, a request size limit named ``name``, once it is a positive integer (not a bool).

    Raises:
        UsageError: naming ``name``, the value given and the default.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(
            f"{name} must be a positive integer (a size in bytes; the default is {DEFAULT_MAX_REQUEST_BYTES}, 1 MiB), "
            f"got {value!r}",
            argument=argument_named(name),
        )
    return value


def check_seconds(name: str, value: object, default: float) -> float:
    """``value``, a timeout named ``name``, once it is a number of seconds > 0 (not a bool, not NaN).

    Raises:
        UsageError: naming ``name``, the value given and ``default``.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise UsageError(
            f"{name} must be a number of seconds > 0 (the default is {default:g}), got {value!r}",
            argument=argument_named(name),
        )
    return float(value)


def check_body_timeout(name: str, value: object) -> float:
    """``value``, a body timeout named ``name``, once it is a number of seconds > 0 (:func:`check_seconds`)."""
    return check_seconds(name, value, DEFAULT_BODY_TIMEOUT_S)


def too_large(limit: int, what: str = "the request body") -> str:
    """The refusal of a request over ``limit`` bytes (``what`` names what was measured)."""
    return f"{what} is larger than the server's limit of {limit} bytes"


def blank(text: str) -> bool:
    """Whether ``text``, a request, has nothing to ask (empty, or only whitespace)."""
    return not text.strip()
