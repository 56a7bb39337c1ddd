"""A client that stops reading a stream (and keeps its connection) loses it after ``--send-timeout`` seconds.

Before, such a client was no disconnect: once the unread reply filled the connection's buffers,
the run waited at its next write, holding its slot of ``--max-concurrency`` for as long as the
client kept the connection open (only a proxy's send timeout or a shutdown ended it). Now a write
not accepted within the send timeout takes the client-disconnect path: the run is cut as if the
client had gone (the journal keeps what it recorded), its slot is given back, the connection closed.
Each test talks raw HTTP/1.1 over a socket, with a small receive buffer, to uvicorn on 127.0.0.1.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import httpx2 as httpx
import pytest
from typer.testing import CliRunner

from jeeves_router.cli import app as cli
from jeeves_router.errors import UsageError
from jeeves_router.events import TextDelta
from jeeves_router.journal import MemoryJournal, SQLiteJournal, recorded_events, session_turns
from jeeves_router.serve import create_app
from tests.serve_apps import FLOOD, Flood, ServerThread, build_desk, desk_with, running, served_by_cli

GUARD_S = 60.0  # only so that a regression fails instead of hanging the suite


def _request(body: dict[str, object], headers: bytes = b"") -> bytes:
    data = json.dumps(body).encode()
    head = b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n" + headers
    return head + b"content-length: %d\r\n\r\n" % len(data) + data


def _answered(url: str, body: dict[str, object], headers: dict[str, str] | None = None) -> httpx.Response:
    """The first reply to ``body`` that is no 429 (a run slot was free), or the last 429 after the hang guard."""
    deadline = time.monotonic() + GUARD_S
    while (
        reply := httpx.post(url + "/v1/chat/completions", json=body, headers=headers, timeout=GUARD_S)
    ).status_code == 429:
        if time.monotonic() > deadline:
            break
        threading.Event().wait(0.05)
    return reply


def _texts(raw: bytes) -> str:
    """The content of every whole ``data:`` line of a streamed chat reply (chunk sizes and a cut last line skipped)."""
    said = []
    for line in raw.split(b"\n"):
        if line.startswith(b"data: {") and line.endswith(b"}"):
            for choice in json.loads(line[6:]).get("choices", ()):
                said.append(choice["delta"].get("content") or "")
    return "".join(said)


def test_a_reader_that_stalls_past_the_send_timeout_is_dropped_its_run_cut_and_its_slot_freed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    journal = tmp_path / "runs.db"
    args = ["tests.serve_apps:flood_desk", "--journal", str(journal), "--port", "0"]
    asgi = served_by_cli(monkeypatch, [*args, "--max-concurrency", "1", "--send-timeout", "0.5"])
    with running(asgi) as server, socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connecting: a small window
        sock.connect(("127.0.0.1", server.port))
        sock.settimeout(GUARD_S)
        body = {"model": "desk", "messages": [{"role": "user", "content": "refund please"}], "stream": True}
        sock.sendall(_request({**body, "session_id": "stalled"}))
        got = sock.recv(4096)  # the head and the start of the stream; then this client stops reading
        assert got.startswith(b"HTTP/1.1 200 OK")
        assert FLOOD.cut.wait(GUARD_S), "the run of a stalled reader was never cut"  # before: it waited for good
        hello = {"model": "desk", "messages": [{"role": "user", "content": "hello"}]}  # the general route answers
        again = _answered(server.url, hello)  # once the cut run has ended (its journal written), its slot is free
        assert again.status_code == 200, "the stalled reader's run kept its slot (--max-concurrency 1)"
        while piece := sock.recv(65536):  # what the buffers held, then the server's close
            got += piece
    assert b"[DONE]" not in got  # dropped, not finished
    events = anyio.run(recorded_events, SQLiteJournal(journal), "stalled")
    recorded = "".join(ev.text for ev in events if isinstance(ev, TextDelta))
    sent = _texts(got)
    assert sent and recorded.startswith(sent)  # all the client was sent is in the journal
    turns = anyio.run(session_turns, SQLiteJournal(journal), "stalled")
    assert [(t.status, t.route) for t in turns] == [("cut", "billing")]


class Stalls(logging.Handler):
    """Sets ``seen`` when the server logs that a client stopped reading."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.seen = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("client stalled"):
            self.seen.set()


@contextmanager
def stalled_keyed_reader(flood: Flood, key: str, max_concurrency: int) -> Iterator[tuple[ServerThread, socket.socket]]:
    """A served desk whose keyed stream (``key``) has a reader that stopped reading and was dropped.

    Yields the server and the stalled client's socket once the server has logged the drop; the
    keyed run (``flood``) goes on, and the server closes the socket when it ends.
    """
    stalls, log = Stalls(), logging.getLogger("jeeves_router.serve")
    log.addHandler(stalls)
    level, log.level = log.level, logging.INFO
    app = create_app(desk_with(flood), journal=MemoryJournal(), max_concurrency=max_concurrency, send_timeout_s=0.5)
    try:
        with running(app) as server, socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.connect(("127.0.0.1", server.port))
            sock.settimeout(GUARD_S)
            sock.sendall(_request({**REFUND, "stream": True}, b"idempotency-key: %s\r\n" % key.encode()))
            assert sock.recv(4096).startswith(b"HTTP/1.1 200 OK")  # then this client stops reading
            assert stalls.seen.wait(GUARD_S), "the stalled reader was never dropped"
            yield server, sock
    finally:
        log.removeHandler(stalls)
        log.level = level


REFUND = {"model": "desk", "messages": [{"role": "user", "content": "refund please"}]}


def test_a_keyed_run_whose_reader_stalls_goes_on_to_its_end_holding_its_slot_and_its_retry_gets_it() -> None:
    flood = Flood()
    with stalled_keyed_reader(flood, "stalled-1", max_concurrency=1) as (server, sock):
        hello = {"model": "desk", "messages": [{"role": "user", "content": "hello"}]}
        busy = httpx.post(server.url + "/v1/chat/completions", json=hello, timeout=GUARD_S)
        assert busy.status_code == 429 and not flood.cut.is_set()  # the keyed run goes on, in its slot
        flood.stop.set()
        assert flood.finished.wait(GUARD_S)
        got = b""
        while piece := sock.recv(65536):  # the server closes the connection once the run has ended
            got += piece
        retry = _answered(server.url, REFUND, {"idempotency-key": "stalled-1"})
    assert b"[DONE]" not in got
    assert retry.status_code == 200 and retry.headers["idempotent-replayed"] == "true"
    assert retry.json()["jeeves"]["status"] == "ok" and set(retry.json()["choices"][0]["message"]["content"]) == {"x"}


def test_send_timeout_is_checked_naming_the_argument_and_the_flag() -> None:
    for bad in (0, -1, float("nan"), True, "5"):
        with pytest.raises(UsageError, match=r"^send_timeout_s must be a number of seconds > 0 \(the default is 60\)"):
            create_app(build_desk(), send_timeout_s=bad)  # type: ignore[arg-type]
    result = CliRunner().invoke(cli, ["serve", "tests.mcp_servers.desk:desk", "--send-timeout", "0"])
    assert result.exit_code == 2, result.output
    assert result.output == "error: --send-timeout must be a number of seconds > 0 (the default is 60), got 0.0\n"


def test_a_retry_while_the_stalled_readers_keyed_run_goes_on_is_told_it_is_in_flight_then_gets_its_answer() -> None:
    """A free slot, so the retry reaches the key: 409 in flight (the dropped reader's run not cut), then the answer."""
    flood, key = Flood(), {"idempotency-key": "stalled-2"}
    with stalled_keyed_reader(flood, "stalled-2", max_concurrency=4) as (server, sock):
        for stream in (False, True):
            during = httpx.post(
                server.url + "/v1/chat/completions", json={**REFUND, "stream": stream}, headers=key, timeout=GUARD_S
            )
            assert during.status_code == 409 and during.json()["error"]["code"] == "idempotency_key_in_flight"
            assert during.headers["retry-after"]
        assert not flood.cut.is_set()  # the retries took nothing from the run
        flood.stop.set()
        assert flood.finished.wait(GUARD_S)
        while sock.recv(65536):  # the server closes the connection once the run has ended
            pass
        retry = _answered(server.url, REFUND, key)
    assert retry.status_code == 200 and retry.headers["idempotent-replayed"] == "true"
    assert retry.json()["jeeves"]["status"] == "ok" and set(retry.json()["choices"][0]["message"]["content"]) == {"x"}
