"""Crash a routed run with SIGKILL in a subprocess, then finish it with agent.resume()."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest

from jeeves_router import Agent
from jeeves_router.errors import UsageError
from jeeves_router.journal import (
    JournalRuntime,
    MemoryJournal,
    SQLiteJournal,
    ToolOutcomeUnknown,
    current_idempotency_key,
    recorded_events,
)
from jeeves_router.testing import Call, ScriptedModel
from jeeves_router.tools import tool
from tests.journal_helpers import PROMPT, DeskModel, build_desk, read_counts, strip_ts

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _child(journal: str, counter: str, marker: str, hang_at: str) -> None:
    """Run the desk until ``hang_at`` hangs; the parent SIGKILLs this process."""
    model = DeskModel(counter=Path(counter), hang_at=hang_at, marker=Path(marker))
    desk = build_desk(JournalRuntime(SQLiteJournal(journal)), model, counter=Path(counter))
    anyio.run(lambda: desk.run(PROMPT, session_id="crash-1"))


def _crash_child(journal: Path, counter: Path, marker: Path, hang_at: str) -> None:
    """Start the child, wait until it hangs at ``hang_at``, SIGKILL it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, __file__, str(journal), str(counter), str(marker), hang_at]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else "child exited"
            assert time.monotonic() < deadline, "child never reached the kill point"
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()  # reaped: a failed test leaves no process (a ResourceWarning in a later test)
        if proc.stderr:
            proc.stderr.close()


async def _uninterrupted() -> tuple[str | None, list[dict[str, object]]]:
    journal = MemoryJournal()
    desk = build_desk(JournalRuntime(journal), DeskModel())
    result = await desk.run(PROMPT, session_id="crash-1")
    return result.output, strip_ts(await recorded_events(journal, "crash-1"))


@pytest.mark.anyio
@pytest.mark.parametrize("hang_at", ["INV-7:1", "INV-7:2"], ids=["first-specialist-call", "after-tool-call"])
async def test_sigkilled_run_resumes_without_repeating_completed_model_calls(tmp_path: Path, hang_at: str) -> None:
    journal, counter, marker = tmp_path / "j.db", tmp_path / "calls.txt", tmp_path / "hanging"
    await anyio.to_thread.run_sync(_crash_child, journal, counter, marker, hang_at)
    before = read_counts(counter)
    assert before["done classify:INV-7"] == 1 and f"done {hang_at}" not in before

    resumed_model = DeskModel(counter=counter)
    desk = build_desk(JournalRuntime(SQLiteJournal(journal)), resumed_model, counter=counter)
    result = await desk.resume("crash-1")

    expected_output, expected_events = await _uninterrupted()
    assert result.output == expected_output == "Refund issued: INV-7 was paid twice."
    assert resumed_model.calls == (["INV-7:1", "INV-7:2"] if hang_at == "INV-7:1" else ["INV-7:2"])
    after = read_counts(counter)
    for label in ("classify:INV-7", "INV-7:1", "INV-7:2"):
        assert after[f"done {label}"] == 1, (label, after)
    assert after["tool INV-7"] == 1
    assert strip_ts(await recorded_events(SQLiteJournal(journal), "crash-1")) == expected_events

    # resuming a finished session replays it: same result, no model call
    again = DeskModel()
    assert (await build_desk(JournalRuntime(SQLiteJournal(journal)), again).resume("crash-1")).output == result.output
    assert again.calls == []


class Crash(BaseException):
    """Stands for the process dying in the middle of a tool call."""


def _tool_agent(runtime: JournalRuntime, model: ScriptedModel, seen: list[str | None], crash: bool) -> Agent:
    @tool
    async def refund(invoice: str) -> str:
        """Refund an invoice."""
        seen.append(current_idempotency_key())
        if crash:
            raise Crash
        return f"refunded {invoice}"

    return Agent("You refund.", name="refunds", model=model, tools=[refund], runtime=runtime)


def _script() -> list[object]:
    return [Call("refund", {"invoice": "INV-3"}, id="c1"), "Done."]


@pytest.mark.anyio
@pytest.mark.parametrize("policy", ["fail", "retry", "skip"])
async def test_a_tool_call_interrupted_by_a_crash_follows_the_unknown_outcome_policy(policy: str) -> None:
    journal = MemoryJournal()
    seen: list[str | None] = []
    with pytest.raises(Crash):
        await _tool_agent(JournalRuntime(journal), ScriptedModel(_script(), name="m"), seen, crash=True).run(
            "refund INV-3", session_id="t1"
        )
    assert len(seen) == 1 and seen[0] is not None

    model = ScriptedModel(["Done."], name="m")  # the first reply (the tool call) is in the journal
    agent = _tool_agent(
        JournalRuntime(journal, on_unknown_tool_outcome=policy),
        model,
        seen,  # type: ignore[arg-type]
        crash=False,
    )
    if policy == "fail":
        with pytest.raises(ToolOutcomeUnknown, match=r"INV-3|refund"):
            await agent.resume("t1")
        assert len(seen) == 1
        return
    result = await agent.resume("t1")
    assert result.output == "Done."
    tool_result = model.requests[0].messages[-1].parts[0]
    if policy == "retry":
        assert seen == [seen[0], seen[0]]  # called again, with the same idempotency key
        assert tool_result.content == "refunded INV-3"  # type: ignore[union-attr]
    else:
        assert len(seen) == 1
        assert tool_result.is_error and "unknown" in tool_result.content  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_resume_needs_a_journal_and_a_recorded_session() -> None:
    plain = Agent("x", name="plain", model=ScriptedModel([]))
    with pytest.raises(UsageError, match="JournalRuntime"):
        await plain.resume("s")
    journaled = Agent("x", name="plain", model=ScriptedModel([]), runtime=JournalRuntime(MemoryJournal()))
    with pytest.raises(UsageError, match="no recorded run"):
        await journaled.resume("nothing-here")


@pytest.mark.anyio
async def test_a_stream_closed_early_is_resumed_from_its_completed_steps() -> None:
    journal = MemoryJournal()
    first = DeskModel()
    async with build_desk(JournalRuntime(journal), first).stream(PROMPT, session_id="early") as events:
        async for ev in events:
            if ev.kind == "tool.result":
                break
    assert first.calls == ["classify:INV-7", "INV-7:1"]
    again = DeskModel()
    result = await build_desk(JournalRuntime(journal), again).resume("early")
    assert result.output == "Refund issued: INV-7 was paid twice."
    assert again.calls == ["INV-7:2"]


if __name__ == "__main__":
    _child(*sys.argv[1:5])
