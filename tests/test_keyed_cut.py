"""A keyed run cut by its own server's shutdown: a retry on any server resumes it at once.

The desk and helpers are those of :mod:`tests.test_serve_idempotency`.
"""

from __future__ import annotations

import threading
from pathlib import Path

import anyio
import httpx2 as httpx

from jeeves_router.ids import keyed_run_id, keyed_session_id
from jeeves_router.journal import SQLiteJournal, session_turns
from jeeves_router.journal.records import RunEndRecord
from jeeves_router.serve import create_app
from jeeves_router.serve.guard import Drain
from tests.serve_apps import running
from tests.test_serve_idempotency import ANSWER, CHAT, Desk, chat, keyed


def test_a_keyed_run_cut_by_its_servers_shutdown_is_resumed_at_once_by_another_server(tmp_path: Path) -> None:
    refunds: list[str] = []
    gate = threading.Event()  # never set: a's model hangs after the refund until the shutdown cuts it
    one, two = Desk(refunds, answer_gate=gate), Desk(refunds)
    path, drain = tmp_path / "runs.db", Drain()
    with (
        running(create_app(one.agent, journal=SQLiteJournal(path), drain=drain)) as a,
        running(create_app(two.agent, journal=SQLiteJournal(path))) as b,
    ):
        first: dict[str, httpx.Response] = {}
        thread = threading.Thread(
            target=lambda: first.update(r=httpx.post(a.url + CHAT, json=chat(), headers=keyed("order-40")))
        )
        thread.start()
        assert one.started.wait(30)
        for _ in range(3000):  # the refund is journaled; a's run now waits for its answer
            if refunds:
                break
            thread.join(0.01)
        drain.start()  # a's shutdown: the grace period is over, its runs are cancelled
        a.server.servers[0].get_loop().call_soon_threadsafe(drain.cancel_all)
        thread.join(30)
        # b's runtime (another owner, in_flight_s = 120 s) resumes the cut run with no wait
        retried = httpx.post(b.url + CHAT, json=chat(), headers=keyed("order-40"))
    assert first["r"].status_code == 503 and first["r"].json()["error"]["code"] == "shutting_down"
    assert retried.status_code == 200, retried.text
    assert retried.json()["choices"][0]["message"]["content"] == ANSWER
    assert refunds == ["INV-1"]  # b served the refund a journaled
    sid = keyed_session_id("order-40")

    async def ends() -> list[tuple[int, str]]:
        async with SQLiteJournal(path) as journal:
            entries = await journal.read(sid, types=("run.end",))
        return [(e.record.attempt, e.record.status) for e in entries if isinstance(e.record, RunEndRecord)]

    assert anyio.run(ends) == [(1, "cut"), (2, "completed")]
    turns = anyio.run(session_turns, SQLiteJournal(path), sid)
    assert [(t.run_id, t.status, t.output) for t in turns] == [(keyed_run_id(sid, "order-40"), "ok", ANSWER)]
