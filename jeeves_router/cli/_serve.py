"""The commands that serve agents: ``jeeves-router serve`` (HTTP) and ``jeeves-router mcp`` (MCP).

Both take the same request size limit (``--max-request-bytes``, :mod:`jeeves_router._limits`),
the same concurrency limit (``--max-concurrency``, :mod:`jeeves_router._slots`), the same journal
option and the same token guard. The servers (Starlette, uvicorn, the ``mcp``
SDK) are imported when a command runs, not when the command line is built.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import typer

from .._env import secret_from_env
from .._limits import DEFAULT_BODY_TIMEOUT_S, DEFAULT_MAX_REQUEST_BYTES, DEFAULT_SEND_TIMEOUT_S
from .._slots import DEFAULT_MAX_CONCURRENCY
from ..errors import UsageError
from ._errors import bad_input, flag

__all__ = ["mcp_command", "serve_command"]

JournalOpt = Annotated[str | None, typer.Option(help="Sessions journal: a SQLite file or a postgresql:// URL.")]
_MAX_REQUEST_BYTES = "--max-request-bytes"
_BODY_TIMEOUT = "--body-timeout"
_MAX_CONCURRENCY = "--max-concurrency"
_SEND_TIMEOUT_HELP = (
    "Seconds a streamed reply may wait for its client to read; then the client is dropped, its run cut."
)
_BODY_TIMEOUT_HELP = "Seconds a request body may take to arrive (from its headers); a slower one gets 408."


def serve_command(
    ctx: typer.Context,
    target: Annotated[str, typer.Argument(help="module:attr of an Agent, a list or a mapping of agents.")],
    host: Annotated[str, typer.Option(help="Address to listen on (not loopback: needs a token).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port.")] = 8000,
    journal: JournalOpt = None,
    token_env: Annotated[str | None, typer.Option(help="Environment variable holding the bearer token.")] = None,
    max_concurrency: Annotated[
        int, typer.Option(_MAX_CONCURRENCY, help="Runs in flight at once; more get 429.")
    ] = DEFAULT_MAX_CONCURRENCY,
    max_request_bytes: Annotated[
        int, typer.Option(_MAX_REQUEST_BYTES, help="Request bodies larger than this many bytes get 413.")
    ] = DEFAULT_MAX_REQUEST_BYTES,
    body_timeout_s: Annotated[float, typer.Option(_BODY_TIMEOUT, help=_BODY_TIMEOUT_HELP)] = DEFAULT_BODY_TIMEOUT_S,
    send_timeout_s: Annotated[float, typer.Option("--send-timeout", help=_SEND_TIMEOUT_HELP)] = DEFAULT_SEND_TIMEOUT_S,
    grace_s: Annotated[int, typer.Option("--grace", help="Seconds runs may finish in after SIGTERM.")] = 30,
) -> None:
    """Serve agents over HTTP: OpenAI-compatible chat completions, run event streams, sessions."""
    with bad_input(ctx):
        from .._limits import check_body_timeout, check_limit, check_seconds
        from .._slots import check_max_concurrency
        from ..serve import load_agents, serve

        check_limit("max_request_bytes", max_request_bytes)  # before the target's module is imported
        check_body_timeout("body_timeout_s", body_timeout_s)
        check_seconds("send_timeout_s", send_timeout_s, DEFAULT_SEND_TIMEOUT_S)
        check_max_concurrency("max_concurrency", max_concurrency)
        token = secret_from_env(token_env, option=flag(ctx, "token_env"))
        options: dict[str, Any] = {
            "journal": journal,
            "max_concurrency": max_concurrency,
            "max_request_bytes": max_request_bytes,
            "body_timeout_s": body_timeout_s,
            "send_timeout_s": send_timeout_s,
        }
        serve(
            load_agents(target, option=flag(ctx, "target")),
            host=host,
            port=port,
            token=token,
            grace_s=grace_s,
            **options,
        )


def mcp_command(
    ctx: typer.Context,
    target: Annotated[str, typer.Argument(help="The agent (router) to serve, as module:attribute.")],
    transport: Annotated[str, typer.Option("--transport", help="stdio or http (streamable HTTP).")] = "stdio",
    host: Annotated[
        str | None,
        typer.Option("--host", help="HTTP: interface to listen on (not loopback: needs a token). Default: 127.0.0.1."),
    ] = None,
    port: Annotated[int | None, typer.Option("--port", help="HTTP: port. Default: 8000.")] = None,
    token_env: Annotated[
        str | None, typer.Option("--token-env", help="HTTP: environment variable holding the bearer token.")
    ] = None,
    journal: JournalOpt = None,
    max_request_bytes: Annotated[
        int,
        typer.Option(
            _MAX_REQUEST_BYTES,
            help="Larger requests (bytes) are refused: an HTTP body gets 413, an `ask` over stdio an error result.",
        ),
    ] = DEFAULT_MAX_REQUEST_BYTES,
    body_timeout_s: Annotated[
        float | None,
        typer.Option(_BODY_TIMEOUT, help=f"HTTP: s{_BODY_TIMEOUT_HELP[1:]} Default: {DEFAULT_BODY_TIMEOUT_S:g}."),
    ] = None,
    max_concurrency: Annotated[
        int,
        typer.Option(_MAX_CONCURRENCY, help="Runs in flight at once; a further `ask` gets an error result (busy)."),
    ] = DEFAULT_MAX_CONCURRENCY,
) -> None:
    """Serve an agent or router as an MCP server with one tool, `ask` (needs the mcp extra)."""
    from ..mcp.server import main

    with bad_input(ctx):
        if transport not in ("stdio", "http"):
            raise UsageError(f"{flag(ctx, 'transport')} must be stdio or http, got {transport!r}")
        if transport == "stdio" and (host is not None or port is not None or body_timeout_s is not None):
            http_only = (("host", host), ("port", port), ("body_timeout_s", body_timeout_s))
            given = " and ".join(flag(ctx, p) for p, v in http_only if v is not None)
            http = f"{flag(ctx, 'transport')} http"
            raise UsageError(
                f"{given}: only {http} listens on an address; stdio talks over this process's stdin and "
                f"stdout: add {http}"
            )
        token = secret_from_env(token_env, option=flag(ctx, "token_env"))
        via: Literal["stdio", "http"] = "http" if transport == "http" else "stdio"
        main(
            target,
            transport=via,
            host="127.0.0.1" if host is None else host,
            port=8000 if port is None else port,
            token=token,
            journal=journal,
            max_request_bytes=max_request_bytes,
            body_timeout_s=DEFAULT_BODY_TIMEOUT_S if body_timeout_s is None else body_timeout_s,
            max_concurrency=max_concurrency,
            option=flag(ctx, "target"),
        )
