"""Seams of the HTTP and MCP fronts: a run that fails before its first event, text that is not Unicode, exposure."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence

import anyio
import httpx2 as httpx
import pytest

from jeeves_router.errors import UsageError
from jeeves_router.journal import Entry, MemoryJournal, SQLiteJournal
from jeeves_router.serve import create_app, serve
from tests.serve_apps import build_desk, running

SECRET = "postgresql://jeeves:s3cret-pw@db.internal/jeeves"


class DownJournal(MemoryJournal):
    """A journal whose database is unreachable: every write fails (its message quotes the URL)."""

    async def append(self, entries: Sequence[Entry]) -> None:
        raise ConnectionRefusedError(f"cannot reach {SECRET}")


def test_a_run_whose_journal_cannot_be_written_answers_an_error_not_an_empty_event_stream(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    with running(create_app(build_desk(), journal=DownJournal())) as server:
        events = httpx.post(server.url + "/v1/runs", json={"model": "desk", "input": "refund please"})
        whole = httpx.post(
            server.url + "/v1/chat/completions",
            json={"model": "desk", "messages": [{"role": "user", "content": "refund please"}]},
        )
    # the run failed before its run.started: there is no run.failed to stream, so the reply is the error
    assert events.status_code == 500 and events.headers["content-type"] == "application/json"
    assert events.json() == whole.json()
    assert events.json()["error"] == {
        "message": "the run failed (ConnectionRefusedError); see the server log",
        "type": "server_error",
        "param": None,
        "code": "run_failed",
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},  # no request was sent
    }
    for text in (events.text, whole.text, caplog.text):
        assert "s3cret-pw" not in text


@pytest.mark.parametrize("journal", ["memory", "sqlite"])
def test_text_with_an_unpaired_surrogate_is_a_client_error_on_every_endpoint(journal: str, tmp_path: object) -> None:
    store = MemoryJournal() if journal == "memory" else SQLiteJournal(f"{tmp_path}/runs.db")
    lone = "refund \\ud83d please"  # half of an emoji, as a UTF-16 slice of a JavaScript string gives it
    bodies = {
        "/v1/chat/completions": '{"model": "desk", "messages": [{"role": "user", "content": "%s"}]}',
        "/v1/runs": '{"model": "desk", "input": "%s", "session_id": "s-1"}',
    }
    with running(create_app(build_desk(), journal=store)) as server:
        for path, template in bodies.items():
            for stream in (False, True):
                body = json.loads(template % lone)
                if path.endswith("completions"):
                    body["stream"] = stream
                raw = json.dumps(body).encode()  # json escapes the lone surrogate as \ud83d
                r = httpx.post(server.url + path, content=raw, headers={"content-type": "application/json"})
                assert r.status_code == 400, (path, stream, r.text)
                error = r.json()["error"]
                assert error["code"] == "invalid_json" and "surrogate" in error["message"]
                where = "messages[0].content" if path.endswith("completions") else "input"
                assert error["param"] == where.split("[")[0] and f"field {where!r}" in error["message"]
        # a whole surrogate pair is one character: it runs
        paired = '{"model": "desk", "messages": [{"role": "user", "content": "refund \\ud83d\\ude00 please"}]}'
        ok = httpx.post(server.url + "/v1/chat/completions", content=paired.encode())
        assert ok.status_code == 200 and ok.json()["jeeves"]["route"] == "billing"
    if isinstance(store, SQLiteJournal):
        sessions = anyio.run(store.sessions)
        assert sessions[0] == ok.json()["jeeves"]["session_id"] and "s-1" not in sessions  # the refused never ran


def test_the_parser_finds_a_lone_surrogate_in_keys_nested_values_and_utf16_bodies() -> None:
    from jeeves_router.serve.wire import ApiError, parse_json

    for raw, where in (
        (b'{"model": "desk", "context": {"a": [1, {"\\udc00": true}]}}', "context.a[1]"),  # a key: its object
        ('{"input": "x\\ud800"}'.encode("utf-16"), "input"),
        (b'{"messages": [{"content": "ok"}, {"content": [{"text": "\\ud83d"}]}]}', "messages[1].content[0].text"),
    ):
        with pytest.raises(ApiError, match="unpaired UTF-16 surrogate") as refused:
            parse_json(raw)
        assert f"field {where!r}" in refused.value.message and refused.value.param == where.split(".")[0].split("[")[0]
    with pytest.raises(ApiError, match="a key of the request body") as refused:
        parse_json(b'{"\\udc00": 1}')
    assert refused.value.param is None
    assert parse_json(b'{"input": "a literal \\\\ud800 is text"}') == {"input": "a literal \\ud800 is text"}


def test_the_mcp_http_front_refuses_a_non_loopback_host_as_the_http_front_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("mcp")
    from jeeves_router.mcp import server as mcp_server

    class NeverListens:
        def streamable_http_app(self, **options: object) -> None:
            raise AssertionError(f"it would listen on {options['host']!r}")

    monkeypatch.setattr(mcp_server, "router_server", lambda agent, **options: NeverListens())
    desk = build_desk()
    for host in ("0.0.0.0", "192.168.1.10", "::"):
        with pytest.raises(UsageError, match=f"refusing to listen on {host!r} without a token") as refused:
            anyio.run(lambda: mcp_server.serve(desk, transport="http", host=host, port=0))  # noqa: B023
        with pytest.raises(UsageError) as served:  # the HTTP front says the same: one check serves both
            serve(desk, host=host, port=0)
        assert str(refused.value) == str(served.value).replace("serve --token-env", "mcp --transport http --token-env")
        with pytest.raises(AssertionError, match=f"it would listen on {host!r}"):  # a token lets it listen
            anyio.run(lambda: mcp_server.serve(desk, transport="http", host=host, port=0, token="t0ken-123456"))  # noqa: B023
    with pytest.raises(UsageError, match="token must be a string of at least 8 characters"):
        anyio.run(lambda: mcp_server.serve(desk, transport="http", port=0, token="short"))
    with pytest.raises(AssertionError, match=r"it would listen on '127\.0\.0\.1'"):  # loopback is served
        anyio.run(lambda: mcp_server.serve(desk, transport="http", host="127.0.0.1", port=0))
