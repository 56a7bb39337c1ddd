"""``replay`` and ``trace`` of a journal written with its own key (``SQLiteJournal(path, key=...)``).

The commands had no way to be given the key: every such journal was reported as tampered
with ("entry 1 ... fails its checksum: it was modified, ..."). ``--key-env VAR`` names the
environment variable holding it (never a command-line argument, which ``ps`` shows); a
checksum failure says a key other than the writer's is one cause.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from typer.testing import CliRunner

from jeeves_router import Agent
from jeeves_router.cli import app
from jeeves_router.journal import JournalRuntime, SQLiteJournal
from jeeves_router.testing import ScriptedModel

KEY = "k3y-of-the-desk"


def _keyed_journal(path: Path) -> None:
    async def record() -> None:
        async with SQLiteJournal(path, key=KEY.encode()) as journal:
            desk = Agent("Desk.", name="desk", model=ScriptedModel(["Refunded."]), runtime=JournalRuntime(journal))
            await desk.run("refund INV-1", session_id="s")

    anyio.run(record)


def test_replay_and_trace_read_a_journal_with_the_key_an_environment_variable_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "keyed.db"
    _keyed_journal(path)
    monkeypatch.setenv("DESK_JOURNAL_KEY", KEY)
    replay = CliRunner().invoke(app, ["replay", str(path), "-s", "s", "--key-env", "DESK_JOURNAL_KEY"])
    assert replay.exit_code == 0, replay.output
    assert [line.split()[0] for line in replay.output.splitlines()] == ["run.started", "text.delta", "run.completed"]
    out = tmp_path / "t.html"
    args = ["trace", str(path), "-s", "s", "-o", str(out), "--key-env", "DESK_JOURNAL_KEY"]
    trace = CliRunner().invoke(app, args)
    assert trace.exit_code == 0, trace.output
    assert "Refunded." in out.read_text(encoding="utf-8")


def test_a_journal_read_without_its_key_says_the_key_may_be_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "keyed.db"
    _keyed_journal(path)
    result = CliRunner().invoke(app, ["replay", str(path), "-s", "s"])
    assert result.exit_code == 2
    assert result.output.startswith(f"error: journal {path}: entry 1 (session 's', run ")
    assert result.output.endswith(
        "fails its checksum: it was modified, reordered, or the entry before it in its run was removed; or the "
        "journal was written with another key (SQLiteJournal(path, key=...); replay and trace: --key-env VAR)\n"
    )
    monkeypatch.delenv("NO_SUCH_KEY", raising=False)
    unset = CliRunner().invoke(app, ["replay", str(path), "-s", "s", "--key-env", "NO_SUCH_KEY"])
    assert (unset.exit_code, unset.output) == (
        2,
        "error: --key-env NO_SUCH_KEY: the environment variable is unset or empty\n",
    )
