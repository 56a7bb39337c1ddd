"""A request body that arrives too slowly gets 408 and its connection closed (``BodyLimit``'s ``timeout_s``).

uvicorn bounds neither the body's size nor the time it takes: a client that sent its headers
and then trickled its body (or stopped) held its connection and task for as long as it liked.
Each test talks raw HTTP/1.1 over a socket to a server on 127.0.0.1, sending part of a body.
"""

from __future__ import annotations

import contextlib
import json
import socket
from typing import Any

import anyio
import pytest
from typer.testing import CliRunner

from jeeves_router.cli import app as cli
from jeeves_router.errors import UsageError
from jeeves_router.serve import create_app
from tests.mcp_helpers import http_process
from tests.serve_apps import build_desk, running, served_by_cli

HEAD = b"POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
ASK = json.dumps({"model": "desk", "messages": [{"role": "user", "content": "refund me"}]}).encode()


def exchange(port: int, *pieces: bytes, path: str = "/v1/chat/completions") -> tuple[str, dict[str, str], Any]:
    """Send the request head and then ``pieces`` (which may stop short of the body); read to the server's close."""
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.settimeout(60)  # a hang guard: the server closes the connection itself
        sock.sendall(HEAD.replace(b"{path}", path.encode()) + pieces[0])
        for piece in pieces[1:]:
            sock.sendall(piece)
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    status, *lines = head.decode().split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines)
    if headers.get("transfer-encoding") == "chunked":
        whole = b""
        while (size := int(body.split(b"\r\n", 1)[0], 16)) > 0:
            start = body.index(b"\r\n") + 2
            whole, body = whole + body[start : start + size], body[start + size + 2 :]
        body = whole
    return status, headers, json.loads(body)


def test_a_body_that_stops_short_gets_408_and_the_connection_is_closed() -> None:
    with running(create_app(build_desk(), body_timeout_s=0.2)) as server:
        status, headers, body = exchange(server.port, b"content-length: %d\r\n\r\n" % len(ASK), ASK[:10])
        assert status == "HTTP/1.1 408 Request Timeout" and headers["connection"] == "close"
        assert body == {
            "error": {
                "message": "the request body did not arrive within the server's limit of 0.2 seconds of its headers; "
                "send it without pausing",
                "type": "invalid_request_error",
                "param": None,
                "code": "request_timeout",
            }
        }
        chunked = b"transfer-encoding: chunked\r\n\r\n%x\r\n%s\r\n" % (10, ASK[:10])  # no length: the same
        assert exchange(server.port, chunked)[0] == "HTTP/1.1 408 Request Timeout"
        assert server.server.config.app.state.slots.in_flight == 0  # no run was started


def test_a_body_sent_in_pieces_within_the_time_is_answered() -> None:
    with running(create_app(build_desk())) as server:  # the default: 30 s
        pieces = (b"content-length: %d\r\nconnection: close\r\n\r\n" % len(ASK), ASK[:10], ASK[10:])
        status, _, body = exchange(server.port, *pieces)
    assert status == "HTTP/1.1 200 OK" and body["object"] == "chat.completion"


@pytest.mark.parametrize("bad", [0, -1, float("nan"), True, "5"])
def test_body_timeout_s_must_be_a_number_of_seconds_above_zero(bad: object) -> None:
    with pytest.raises(UsageError, match=r"^body_timeout_s must be a number of seconds > 0 \(the default is 30\)"):
        create_app(build_desk(), body_timeout_s=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("command", [["serve"], ["mcp", "--transport", "http"]], ids=["serve", "mcp"])
def test_the_body_timeout_flag_is_checked_naming_the_flag(command: list[str]) -> None:
    result = CliRunner().invoke(cli, [*command, "tests.mcp_servers.desk:desk", "--body-timeout", "0"])
    assert result.exit_code == 2, result.output
    assert result.output == "error: --body-timeout must be a number of seconds > 0 (the default is 30), got 0.0\n"
    stdio = CliRunner().invoke(cli, ["mcp", "tests.mcp_servers.desk:desk", "--body-timeout", "5"])
    assert stdio.exit_code == 2 and stdio.output.startswith("error: --body-timeout: only --transport http listens")


def test_the_served_app_is_built_while_port_8000_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    # `jeeves-router serve` checks its address before it builds the app; on a shared machine
    # 8000 may be held by anything, and served_by_cli failed ("built no app")
    with socket.socket() as held:
        with contextlib.suppress(OSError):  # taken already: the same case
            held.bind(("127.0.0.1", 8000))
            held.listen()
        assert callable(served_by_cli(monkeypatch, ["tests.serve_apps:slow_desk"]))


def test_serve_command_body_timeout_is_the_apps(monkeypatch: pytest.MonkeyPatch) -> None:
    asgi = served_by_cli(monkeypatch, ["tests.serve_apps:slow_desk", "--body-timeout", "0.3"])
    with running(asgi) as server:
        status, _, body = exchange(server.port, b"content-length: %d\r\n\r\n" % len(ASK), ASK[:10])
    assert status == "HTTP/1.1 408 Request Timeout" and "limit of 0.3 seconds" in body["error"]["message"]


@pytest.mark.anyio
async def test_the_mcp_http_transport_holds_its_body_to_the_body_timeout() -> None:
    args = ("-m", "jeeves_router.cli", "mcp", "tests.mcp_servers.desk:desk", "--transport", "http")
    async with http_process(*args, "--port", "{port}", "--body-timeout", "0.3") as (_, port):
        head = b"accept: application/json, text/event-stream\r\ncontent-length: 100\r\n\r\n"
        status, _, body = await anyio.to_thread.run_sync(lambda: exchange(port, head, b'{"jsonrpc"', path="/mcp"))
    assert status == "HTTP/1.1 408 Request Timeout" and body["error"]["code"] == "request_timeout"
