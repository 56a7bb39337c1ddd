"""The request size limit every front door keeps: one rule for the HTTP server and the MCP ``ask`` tool."""

from __future__ import annotations

__all__ = ["DEFAULT_MAX_BODY_BYTES", "too_large"]

#: The default limit on a request, in bytes (1 MiB): ``create_app(max_body_bytes=...)`` and
#: ``router_server(max_request_bytes=...)``.
DEFAULT_MAX_BODY_BYTES = 1_048_576


def too_large(limit: int, what: str = "the request body") -> str:
    """The refusal of a request over ``limit`` bytes (``what`` names what was measured)."""
    return f"{what} is larger than the server's limit of {limit} bytes"
