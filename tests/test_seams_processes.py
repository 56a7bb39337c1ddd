"""Seams: processes sharing one journal at the same time (real processes, not connections).

* Two processes resume one unfinished session at once (SQLite, PostgreSQL): the tool call
  is made once; each process ends ok, or with ``ToolOutcomeUnknown`` when it may not repeat
  the call the other made; the run reads back completed (``jeeves-router replay``, the
  session's turns) and resumes to its answer with no call. Which process wins what varies
  from run to run: these hold in every order (the order that broke the readers is pinned
  in ``test_seams_resume_race.py``).
* One process writes runs while this one reads the session with ``jeeves-router replay``
  and ``jeeves-router trace``, each read on a new connection as a new process would open
  it; the writer closes its connection after every run, so a read may open the file while
  that close checkpoints it. No read fails or calls the file damaged, and nothing written
  is lost.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest
from typer.testing import CliRunner

from jeeves_router.cli import app
from jeeves_router.journal import JournalRuntime, PostgresJournal, SQLiteJournal, recorded_events, session_turns
from jeeves_router.journal.base import Journal
from tests.journal_helpers import PROMPT, DeskModel, build_desk, read_counts

ROOT = Path(__file__).resolve().parents[1]
ANSWER = "Refund issued: INV-7 was paid twice."


def open_journal(where: str) -> Journal:
    """``where``: a SQLite path, or ``postgresql://...#table``."""
    if where.startswith("postgresql://"):
        url, table = where.rsplit("#", 1)
        return PostgresJournal(url, table=table)
    return SQLiteJournal(where)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield str(tmp_path / "j.db")
        return
    url, table = request.getfixturevalue("pg_url"), f"jeeves_test_{uuid.uuid4().hex[:12]}"
    yield f"{url}#{table}"

    async def drop() -> None:
        async with PostgresJournal(url, table=table) as j:
            await j._query(f"DROP TABLE IF EXISTS {table}", [])

    anyio.run(drop)


@contextmanager
def children(code: str, args: list[list[str]]) -> Iterator[list[subprocess.Popen[str]]]:
    """``python -c code *a`` for each ``a``, started at once; on leaving, every one has ended and is reaped.

    A child still running when the block fails is killed: nothing is left behind.
    """
    procs: list[subprocess.Popen[str]] = []
    try:
        for a in args:
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-c", textwrap.dedent(code), *a],
                    cwd=ROOT,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            )
        yield procs
    except BaseException:
        for p in procs:
            if p.poll() is None:
                p.kill()
        raise
    finally:
        for p in procs:
            p.communicate()  # reaped, pipes closed


def finished(procs: list[subprocess.Popen[str]]) -> list[str]:
    """Each child's output, once every one has ended (a hang guard of 240 s each); fails on a non-zero exit."""
    outs = [p.communicate(timeout=240) for p in procs]
    for p, (_, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err
    return [out for out, _ in outs]


RESUME = """
    import json, os, sys, time
    from pathlib import Path
    import anyio
    from jeeves_router.journal import JournalRuntime, ToolOutcomeUnknown
    from tests.journal_helpers import DeskModel, build_desk
    from tests.test_seams_processes import open_journal

    where, counter, ready, go = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4])

    async def main() -> None:
        journal = open_journal(where)
        desk = build_desk(JournalRuntime(journal), DeskModel(counter=counter), counter=counter)
        ready.write_text("ready")
        while not go.exists():  # both processes start resuming together
            time.sleep(0.001)
        try:
            result = await desk.resume("s")
            print(json.dumps({"status": result.status, "output": result.output}))
        except ToolOutcomeUnknown as exc:
            print(json.dumps({"error": type(exc).__name__}))
        finally:
            await journal.aclose()

    anyio.run(main)
"""


@pytest.mark.slow
def test_two_processes_resuming_one_session_at_once_make_the_tool_call_once_and_it_reads_back_completed(
    where: str, tmp_path: Path
) -> None:
    counter, go = tmp_path / "calls.txt", tmp_path / "go"

    async def crash_at_start() -> None:  # a run cut off before its first step: resumable
        journal = open_journal(where)
        stream = build_desk(JournalRuntime(journal), DeskModel()).stream(PROMPT, session_id="s")
        async for _ in stream:
            break
        await stream.aclose()
        await journal.aclose()

    anyio.run(crash_at_start)
    ready = [tmp_path / f"ready-{who}" for who in "AB"]
    with children(RESUME, [[where, str(counter), str(r), str(go)] for r in ready]) as procs:
        deadline = time.monotonic() + 120  # a hang guard: both children import the package first
        while not all(r.exists() for r in ready):
            assert all(p.poll() is None for p in procs), "a child exited before it was ready"
            assert time.monotonic() < deadline, "the children did not start"
            time.sleep(0.01)
        go.write_text("go")
        outcomes = [json.loads(out) for out in finished(procs)]
    assert {"status": "ok", "output": ANSWER} in outcomes
    assert all(o in ({"status": "ok", "output": ANSWER}, {"error": "ToolOutcomeUnknown"}) for o in outcomes)
    assert read_counts(counter)["tool INV-7"] == 1  # the refund lookup was made once

    async def check() -> None:
        journal = open_journal(where)
        try:
            kinds = [e.kind for e in await recorded_events(journal, "s")]
            assert kinds[-1] == "run.completed" and "tool.result" in kinds
            assert [(t.status, t.output) for t in await session_turns(journal, "s")] == [("ok", ANSWER)]
            model = DeskModel(counter=counter)
            again = await build_desk(JournalRuntime(journal), model, counter=counter).resume("s")
            assert (again.status, again.output) == ("ok", ANSWER) and model.calls == []
        finally:
            await journal.aclose()

    anyio.run(check)
    assert read_counts(counter)["tool INV-7"] == 1


WRITE = """
    import sys
    import anyio
    from jeeves_router.journal import JournalRuntime, SQLiteJournal
    from tests.journal_helpers import PROMPT, DeskModel, build_desk

    async def main(path: str, runs: int) -> None:
        for i in range(runs):
            journal = SQLiteJournal(path)  # closed after each run: its close may checkpoint the file
            result = await build_desk(JournalRuntime(journal), DeskModel()).run(f"{PROMPT} {i}", session_id="s")
            assert result.status == "ok", result
            await journal.aclose()

    anyio.run(main, sys.argv[1], int(sys.argv[2]))
"""


@pytest.mark.slow
def test_replay_and_trace_read_a_journal_another_process_is_writing(tmp_path: Path) -> None:
    path, runs = tmp_path / "j.db", 150
    cli = CliRunner()
    seen: list[int] = []
    with children(WRITE, [[str(path), str(runs)]]) as (writer,):
        while writer.poll() is None:
            if not path.exists():
                time.sleep(0.01)
                continue
            replay = cli.invoke(app, ["replay", str(path), "--session", "s", "--json"])
            not_yet = ("no journal tables in it", "has no recorded events")
            if replay.exit_code == 2 and any(why in replay.output for why in not_yet):
                continue  # the writer has not made its tables yet, or the first run has not written its events
            assert replay.exit_code == 0, replay.output
            events = [json.loads(line) for line in replay.output.splitlines()]
            seen.append(sum(e["kind"] == "run.completed" and e["path"] == ["desk"] for e in events))
            trace = cli.invoke(app, ["trace", str(path), "--session", "s", "--out", str(tmp_path / "t.html")])
            assert trace.exit_code == 0, trace.output
        finished([writer])
    assert seen == sorted(seen)  # each read saw at least what the one before it saw

    async def turns() -> list[tuple[str, str]]:
        async with SQLiteJournal(path) as journal:
            return [(t.prompt, t.status) for t in await session_turns(journal, "s")]

    assert anyio.run(turns) == [(f"{PROMPT} {i}", "ok") for i in range(runs)]
