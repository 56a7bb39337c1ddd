"""Routed runs as DBOS workflows: a queue served by two worker processes over one PostgreSQL.

Needs a server: ``eval "$(scripts/postgres.sh)"`` exports ``JEEVES_PG_URL``. Without it
the tests skip (outside CI) with that hint; in CI (``CI=true``) a missing server fails.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from tests.journal_helpers import read_counts

pytestmark = pytest.mark.postgres
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def db_url(pg_url: str) -> Iterator[str]:
    """A fresh database on the server, dropped afterwards, with the DBOS schema created."""
    import psycopg
    from dbos import DBOS

    name = f"jeeves_dbos_{uuid.uuid4().hex[:12]}"
    base, _, _ = pg_url.rpartition("/")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = f"{base}/{name}"
    DBOS.migrate(url)
    yield url
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class Worker:
    """One worker process (this file run as a script)."""

    def __init__(self, tmp: Path, url: str, executor_id: str, *, hang_at: str = "") -> None:
        self.counter = tmp / f"{executor_id}.calls"
        self.ready = tmp / f"{executor_id}.{uuid.uuid4().hex[:6]}.ready"
        self.hanging = tmp / f"{executor_id}.hanging"
        argv = [
            sys.executable,
            __file__,
            url,
            executor_id,
            str(self.counter),
            str(self.ready),
            hang_at,
            str(self.hanging),
        ]
        self.log = open(tmp / f"{executor_id}.log", "ab")
        self.proc = subprocess.Popen(
            argv, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=self.log, stderr=subprocess.STDOUT
        )

    def wait_for(self, marker: Path, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while not marker.exists():
            assert self.proc.poll() is None, f"worker exited with {self.proc.returncode}; see {self.log.name}"
            assert time.monotonic() < deadline, f"worker did not reach {marker.name}"
            time.sleep(0.05)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def _worker_main(url: str, executor_id: str, counter: str, ready: str, hang_at: str, hanging: str) -> None:
    from dbos import DBOS

    from jeeves_router.durable.dbos import DBOSRuntime, DurableAgents, dbos_config
    from tests.journal_helpers import DeskModel, build_desk, lookup_tool

    in_tool = hang_at == "tool"  # hang in the tool call instead of a model call
    in_model = None if in_tool else hang_at or None
    model = DeskModel(counter=Path(counter), hang_at=in_model, marker=Path(hanging), delay=0.02)
    tool = lookup_tool(Path(counter), hang=Path(hanging) if in_tool else None)
    durable = DurableAgents([build_desk(DBOSRuntime(), model, tool=tool)])

    async def main() -> None:
        DBOS(config=dbos_config("jeeves-test", url, executor_id=executor_id, application_version="test-1"))
        DBOS.launch()
        await durable.register_queue(worker_concurrency=4, polling_interval_sec=0.1)
        await anyio.Path(ready).write_text("ready")
        await asyncio.Event().wait()

    asyncio.run(main())


def _total(*counters: Path) -> dict[str, int]:
    total: dict[str, int] = {}
    for c in counters:
        for k, v in read_counts(c).items():
            total[k] = total.get(k, 0) + v
    return total


@pytest.mark.anyio
async def test_fifty_runs_on_two_workers_each_complete_exactly_once(db_url: str, tmp_path: Path) -> None:
    from jeeves_router.durable.dbos import dbos_client, enqueue_run, run_result

    workers = [Worker(tmp_path, db_url, "worker-a"), Worker(tmp_path, db_url, "worker-b")]
    client = None
    try:
        for w in workers:
            await anyio.to_thread.run_sync(w.wait_for, w.ready)
        client = dbos_client(db_url)
        ids = [
            await enqueue_run(
                client, f"charged twice for INV-{i}", agent="desk", session_id=f"sess-{i}", workflow_id=f"run-{i}"
            )
            for i in range(50)
        ]
        assert ids == [f"run-{i}" for i in range(50)]
        for i, wid in enumerate(ids):
            result = await run_result(client, wid)
            assert result.output == f"Refund issued: INV-{i} was paid twice."
            assert result.route == "billing" and result.session_id == f"sess-{i}"
    finally:
        for w in workers:
            w.stop()
        if client is not None:
            client.destroy()
    counts = _total(*(w.counter for w in workers))
    for i in range(50):
        for label in (f"classify:INV-{i}", f"INV-{i}:1", f"INV-{i}:2"):
            assert counts.get(f"start {label}") == 1 and counts.get(f"done {label}") == 1, (label, counts)
        assert counts.get(f"tool INV-{i}") == 1
    assert all(any(k.startswith("done") for k in read_counts(w.counter)) for w in workers), "one worker did nothing"


@pytest.mark.anyio
async def test_a_sigkilled_worker_is_recovered_without_repeating_completed_steps(db_url: str, tmp_path: Path) -> None:
    from jeeves_router.durable.dbos import dbos_client, enqueue_run, run_result

    victim = Worker(tmp_path, db_url, "worker-a", hang_at="INV-77:2")
    client = None
    restarted = None
    try:
        await anyio.to_thread.run_sync(victim.wait_for, victim.ready)
        client = dbos_client(db_url)
        wid = await enqueue_run(
            client, "charged twice for INV-77", agent="desk", session_id="sess-77", workflow_id="run-77"
        )
        await anyio.to_thread.run_sync(victim.wait_for, victim.hanging)
        victim.stop(signal.SIGKILL)
        assert victim.proc.returncode == -signal.SIGKILL
        restarted = Worker(tmp_path, db_url, "worker-a")  # same executor id: DBOS recovers its runs at launch
        result = await run_result(client, wid)
    finally:
        victim.stop(signal.SIGKILL)
        if restarted is not None:
            restarted.stop()
        if client is not None:
            client.destroy()
    assert result.output == "Refund issued: INV-77 was paid twice."
    counts = read_counts(victim.counter)
    assert counts["start classify:INV-77"] == 1 and counts["done classify:INV-77"] == 1
    assert counts["start INV-77:1"] == 1 and counts["done INV-77:1"] == 1
    assert counts["tool INV-77"] == 1
    assert counts["start INV-77:2"] == 2 and counts["done INV-77:2"] == 1  # only the interrupted call ran again


@pytest.mark.anyio
async def test_a_tool_call_cut_by_a_killed_worker_is_not_run_again_on_recovery(db_url: str, tmp_path: Path) -> None:
    """Its outcome is unknown (a refund may have been made): the recovered run stops, as a journal's resume does."""
    from jeeves_router.durable.dbos import dbos_client, enqueue_run, run_result
    from jeeves_router.errors import ToolOutcomeUnknown

    victim = Worker(tmp_path, db_url, "worker-a", hang_at="tool")
    client = None
    restarted = None
    try:
        await anyio.to_thread.run_sync(victim.wait_for, victim.ready)
        client = dbos_client(db_url)
        wid = await enqueue_run(
            client, "charged twice for INV-78", agent="desk", session_id="sess-78", workflow_id="run-78"
        )
        await anyio.to_thread.run_sync(victim.wait_for, victim.hanging)
        victim.stop(signal.SIGKILL)
        restarted = Worker(tmp_path, db_url, "worker-a")  # recovers run-78 at launch
        with pytest.raises(ToolOutcomeUnknown, match="on_unknown_tool_outcome='retry'"):  # the run's own error type
            await run_result(client, wid)
    finally:
        victim.stop(signal.SIGKILL)
        if restarted is not None:
            restarted.stop()
        if client is not None:
            client.destroy()
    counts = read_counts(victim.counter)
    assert counts["tool INV-78"] == 1  # the call the killed worker made, and no other
    assert counts["start INV-78:1"] == 1 and "start INV-78:2" not in counts  # no model call answers a guessed outcome


if __name__ == "__main__":
    _worker_main(*sys.argv[1:7])
