"""The server under pressure: the concurrency limit, a client that disconnects, SIGTERM."""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx2 as httpx
import openai
import pytest

from jeeves_router.errors import UsageError
from jeeves_router.events import TextDelta, event_adapter
from jeeves_router.journal import MemoryJournal, SQLiteJournal, recorded_events, session_turns
from jeeves_router.serve import create_app, serve
from jeeves_router.serve.guard import Drain
from tests.mcp_helpers import listening_ports
from tests.serve_apps import SLOW_CHUNKS, GatedModel, desk_with, running, subprocess_env

CHAT = "/v1/chat/completions"
SENT = ["run.started", "router.classified", "router.dispatched", "run.started", "text.delta"]  # up to the first text


def body(text: str = "refund please", *, stream: bool = True, session: str | None = None) -> dict[str, object]:
    out: dict[str, object] = {"model": "desk", "messages": [{"role": "user", "content": text}], "stream": stream}
    if session is not None:
        out["session_id"] = session
    return out


def contents(lines: Iterator[str]) -> Iterator[str]:
    """The content deltas of a streamed chat completion, until [DONE]."""
    for line in lines:
        if not line.startswith("data: "):
            continue
        if line == "data: [DONE]":
            return
        data = json.loads(line[6:])
        for choice in data.get("choices", ()):
            if choice["delta"].get("content"):
                yield choice["delta"]["content"]


def test_saturated_server_answers_429_with_retry_after_and_frees_the_slot_after(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="jeeves_router")
    model = GatedModel()
    with running(create_app(desk_with(model), max_concurrency=1, retry_after_s=3)) as server:
        with httpx.stream("POST", server.url + CHAT, json=body()) as first:
            assert first.status_code == 200
            pieces = contents(first.iter_lines())  # one iterator: dropping it would close the response
            assert next(pieces) == "first "
            refused = httpx.post(server.url + CHAT, json=body(stream=False))
            assert refused.status_code == 429
            assert refused.headers["retry-after"] == "3"
            assert refused.json()["error"]["code"] == "rate_limit_exceeded"
            # the operator is told the server is at its limit (nothing was logged of a refused run before)
            refusals = [r.getMessage() for r in caplog.records if r.name == "jeeves_router._slots"]
            assert refusals == ["run.refused reason='busy' limit=1"]
            model.gate.set()
            assert "".join(pieces) == "rest."
        again = httpx.post(server.url + CHAT, json=body(stream=False))
        assert again.status_code == 200 and again.json()["choices"][0]["message"]["content"] == "first rest."


def test_a_client_that_disconnects_mid_stream_cancels_its_run_and_the_journal_keeps_what_it_was_sent() -> None:
    model = GatedModel()
    journal = MemoryJournal()
    with running(create_app(desk_with(model), journal=journal, max_concurrency=1)) as server:
        with httpx.stream("POST", server.url + CHAT, json=body(session="gone")) as r:
            assert next(contents(r.iter_lines())) == "first "
        # the client is gone: the specialist's stream is closed, not left running
        assert model.cancelled.wait(60)  # a hang guard
        assert not model.finished.is_set()
        # its slot is free again (max_concurrency=1)
        assert _slot_freed(server.url), "the disconnected run never released its slot"
    entries = anyio.run(journal.read, "gone")
    kinds = [e.record.type for e in entries]
    assert kinds.count("run.start") == 1
    assert [e.record.status for e in entries if e.record.type == "run.end"] == ["cut"]  # type: ignore[union-attr]
    assert "step" in kinds  # the classification completed before the disconnect and stays recorded
    sent = anyio.run(recorded_events, journal, "gone")  # the events of the run up to the text the client got
    assert [ev.kind for ev in sent] == SENT
    assert [ev.text for ev in sent if isinstance(ev, TextDelta)] == ["first "]
    turns = anyio.run(session_turns, journal, "gone")
    assert [(t.prompt, t.status, t.route) for t in turns] == [("refund please", "cut", "billing")]


def test_a_client_that_disconnects_from_the_run_events_leaves_the_events_it_got_in_the_journal() -> None:
    model = GatedModel()
    journal = MemoryJournal()
    got: list[dict[str, object]] = []
    request = {"model": "desk", "input": "refund please", "session_id": "gone"}
    with running(create_app(desk_with(model), journal=journal, max_concurrency=1)) as server:
        with httpx.stream("POST", server.url + "/v1/runs", json=request) as r:
            for line in r.iter_lines():
                if line.startswith("data: "):
                    got.append(json.loads(line[6:]))
                    if got[-1]["kind"] == "text.delta":
                        break
        assert model.cancelled.wait(60)  # a hang guard
        # the slot is free once the run's stream is closed (and its events written)
        assert _slot_freed(server.url), "the disconnected run never released its slot"
    assert [e["kind"] for e in got] == SENT
    recorded = anyio.run(recorded_events, journal, "gone")
    assert [event_adapter().dump_python(ev, mode="json") for ev in recorded] == got
    ends = anyio.run(lambda: journal.read("gone", types=("run.end",)))
    assert [e.record.status for e in ends] == ["cut"]  # type: ignore[union-attr]


def test_refuses_a_non_loopback_host_without_a_token() -> None:
    desk = desk_with(GatedModel())
    with pytest.raises(UsageError, match=r"refusing to listen on '0\.0\.0\.0' without a token"):
        serve(desk, host="0.0.0.0", port=0)


def _spawn(
    tmp_path: Path, target: str, grace: int, extra: tuple[str, ...] = (), env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    """Start ``jeeves-router serve`` on port 0; return the process and its URL once it listens."""
    cmd = [sys.executable, "-m", "jeeves_router.cli", "serve", target, "--port", "0"]
    cmd += ["--grace", str(grace), "--journal", str(tmp_path / "runs.db"), *extra]
    with open(tmp_path / "stderr.txt", "wb") as stderr:
        proc = subprocess.Popen(cmd, env={**subprocess_env(), **(env or {})}, stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        deadline = time.monotonic() + 120  # a hang guard: a loaded machine starts Python slowly
        while not (ports := listening_ports(proc.pid)):
            assert proc.poll() is None, (tmp_path / "stderr.txt").read_text()
            assert time.monotonic() < deadline, "the server did not start"
            threading.Event().wait(0.05)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    (port,) = ports
    return proc, f"http://127.0.0.1:{port}"


def _slot_freed(url: str) -> bool:
    """A run is answered again (``max_concurrency=1``: the slot was released), within a 60 s hang guard."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if httpx.post(url + CHAT, json=body("hello", stream=False), timeout=60).status_code == 200:
            return True
        threading.Event().wait(0.05)
    return False


def _refused(url: str) -> bool:
    """The server refuses connections, within a 60 s hang guard."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.get(url + "/v1/models", timeout=1)
        except httpx.TransportError:
            return True
        threading.Event().wait(0.05)
    return False


@pytest.mark.slow
def test_sigterm_stops_accepting_and_lets_the_stream_in_flight_finish(tmp_path: Path) -> None:
    proc, url = _spawn(tmp_path, "tests.serve_apps:slow_desk", grace=20)
    try:
        with httpx.stream("POST", url + CHAT, json=body(session="s-term"), timeout=30) as r:
            pieces = contents(r.iter_lines())
            assert next(pieces) == "part-first "
            proc.send_signal(signal.SIGTERM)
            assert _refused(url), "the server kept accepting connections after SIGTERM"
            assert "".join(pieces) == "".join(SLOW_CHUNKS)
        # after its graceful shutdown uvicorn re-raises the signal, so supervisors see SIGTERM
        assert proc.wait(30) == -signal.SIGTERM
    finally:
        proc.kill()
        proc.wait()
    turns = anyio.run(session_turns, SQLiteJournal(tmp_path / "runs.db"), "s-term")
    assert [(t.status, t.route) for t in turns] == [("ok", "billing")]


@pytest.mark.slow
def test_sigterm_cancels_runs_still_going_after_the_grace_period(tmp_path: Path) -> None:
    proc, url = _spawn(tmp_path, "tests.serve_apps:stuck_desk", grace=1)
    try:
        with httpx.stream("POST", url + CHAT, json=body(session="s-stuck"), timeout=30) as r:
            lines = r.iter_lines()
            assert next(contents(lines)) == "stuck-first "
            proc.send_signal(signal.SIGTERM)
            rest = [line for line in lines if line]  # the stream ends with an error once the run is cancelled
        assert rest[-1] == "data: [DONE]"
        assert json.loads(rest[-2][6:])["error"]["message"] == "the run failed (ServerShutdown); see the server log"
        assert proc.wait(30) == -signal.SIGTERM
    finally:
        proc.kill()
        proc.wait()
    stderr = (tmp_path / "stderr.txt").read_text()
    assert "Traceback" not in stderr and "ERROR" not in stderr
    journal = SQLiteJournal(tmp_path / "runs.db")
    sent = anyio.run(recorded_events, journal, "s-stuck")  # the cancelled run's events are kept
    assert [ev.kind for ev in sent] == SENT
    assert [ev.text for ev in sent if isinstance(ev, TextDelta)] == ["stuck-first "]
    turns = anyio.run(session_turns, journal, "s-stuck")
    assert [(t.prompt, t.status, t.route) for t in turns] == [("refund please", "cut", "billing")]


def test_a_draining_server_refuses_new_runs_with_503() -> None:
    drain = Drain()
    with running(create_app(desk_with(GatedModel()), drain=drain)) as server:
        drain.start()
        r = httpx.post(server.url + CHAT, json=body(stream=False))
        assert r.status_code == 503 and r.headers["retry-after"] == "1"
        assert r.json()["error"]["code"] == "shutting_down"
        assert r.json()["error"]["type"] == "server_error"  # a 5xx, typed as the other server errors
        assert httpx.get(server.url + "/v1/models").status_code == 200  # reads still answer while draining


@pytest.mark.parametrize(
    ("args", "env", "needle"),
    [
        (["tests.serve_apps:slow_desk", "--host", "0.0.0.0"], {}, "refusing to listen on '0.0.0.0' without a token"),
        (["tests.serve_apps:slow_desk", "--token-env", "NO_SUCH_VAR_XYZ"], {}, "NO_SUCH_VAR_XYZ"),
        (["tests.serve_apps:nothing_here"], {}, "TARGET 'tests.serve_apps:nothing_here': cannot import it"),
        (["tests.serve_apps"], {}, "expected module:attribute"),
        (["tests.serve_apps:SLOW_CHUNKS"], {}, "must be an Agent, not a str"),
        (["tests.serve_apps:slow_desk", "--grace", "-1"], {}, "error: --grace must be a whole number of seconds >= 0"),
        (["tests.serve_apps:slow_desk", "--max-concurrency", "0"], {}, "error: --max-concurrency must be a positive"),
        (["tests.serve_apps:slow_desk", "--max-request-bytes", "0"], {}, "--max-request-bytes must be a positive"),
    ],
)
def test_serve_command_refuses_bad_arguments_before_listening(
    args: list[str], env: dict[str, str], needle: str
) -> None:
    from typer.testing import CliRunner

    from jeeves_router.cli import app

    result = CliRunner().invoke(app, ["serve", *args], env=env)
    assert result.exit_code == 2, result.output
    assert needle in " ".join(result.output.split())


@pytest.mark.slow
def test_the_example_desk_served_by_the_cli_with_a_token(tmp_path: Path) -> None:
    token = "example-t0ken-123456"
    extra = ("--token-env", "DESK_TOKEN")
    proc, url = _spawn(tmp_path, "examples.serve_desk:desk", grace=5, extra=extra, env={"DESK_TOKEN": token})
    try:
        assert httpx.get(url + "/v1/models").status_code == 401
        client = openai.OpenAI(base_url=url + "/v1", api_key=token, max_retries=0)
        for seen, text in enumerate(("I was charged twice", "the API returns 500")):
            reply = client.chat.completions.create(
                model="desk", messages=[{"role": "user", "content": text}], extra_body={"session_id": "ex-1"}
            )
            assert (reply.choices[0].message.content or "").endswith(f"(I see {2 * seen} earlier messages).")
        assert [m.id for m in client.models.list()] == ["desk"]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == -signal.SIGTERM
    finally:
        proc.kill()
        proc.wait()
    assert token not in (tmp_path / "stderr.txt").read_text()
    turns = anyio.run(session_turns, SQLiteJournal(tmp_path / "runs.db"), "ex-1")
    assert [t.route for t in turns] == ["billing", "technical"]


@pytest.mark.parametrize("command", [["serve"], ["mcp", "--transport", "http"]], ids=["serve", "mcp"])
def test_an_address_that_cannot_be_listened_on_is_one_error_line(command: list[str]) -> None:
    """A port in use or out of range: one ``error:`` line and exit 2, not uvicorn's log and traceback."""
    import socket

    from typer.testing import CliRunner

    from jeeves_router.cli import app

    with socket.socket() as held:  # a port another server has: bound and listening for the whole test
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        for given, message in (
            (str(port), f"error: cannot listen on 127.0.0.1:{port}: Address already in use"),
            ("70000", "error: --port must be an integer within 0-65535 (0: any free port), got 70000"),
        ):
            result = CliRunner().invoke(app, [*command, "tests.serve_apps:slow_desk", "--port", given])
            assert result.exit_code == 2, result.output
            assert result.output == message + "\n"


def test_serve_command_max_request_bytes_is_the_apps_body_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.serve_apps import served_by_cli

    asgi = served_by_cli(monkeypatch, ["tests.serve_apps:slow_desk", "--max-request-bytes", "300"])

    async def post(size: int) -> httpx.Response:
        ask = {"model": "desk", "messages": [{"role": "user", "content": "x" * size}]}
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=asgi), base_url="http://test") as client:
            return await client.post(CHAT, json=ask)

    over = anyio.run(post, 300)
    assert over.status_code == 413
    assert over.json()["error"]["message"] == "the request body is larger than the server's limit of 300 bytes"
    assert anyio.run(post, 10).status_code == 200
