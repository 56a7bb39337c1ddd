"""Seams of the HTTP and MCP fronts: a run that fails before its first event, text that is not Unicode, exposure."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import httpx2 as httpx
import pytest

from jeeves_router.journal import Entry, MemoryJournal
from jeeves_router.serve import create_app
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
    }
    for text in (events.text, whole.text, caplog.text):
        assert "s3cret-pw" not in text
