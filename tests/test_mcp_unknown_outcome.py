"""An MCP call whose outcome is unknown (its server had it, then gave no answer in time) under a journal.

One story for "it may have run": the recovery ladder stops on ``ToolOutcomeUnknown``, and a
resume, or a retry a ``classify_error`` hook asks for, follows ``on_unknown_tool_outcome``.
The toolbox's ``refund`` of a ``HANG-...`` invoice hangs on its first call only.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from jeeves_router import Agent, Recovery
from jeeves_router.architectures import ToolLoop
from jeeves_router.errors import ToolOutcomeUnknown
from jeeves_router.events import RecoveryReport, RecoveryRetry
from jeeves_router.journal import JournalRuntime, SQLiteJournal
from jeeves_router.mcp import MCPServerStdio
from jeeves_router.recovery import ErrorClassification, ErrorSeverity
from jeeves_router.testing import Call, RecordedSleeps, ScriptedModel
from tests.mcp_helpers import ENV, TOOLBOX

pytest.importorskip("mcp")
pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("no_process_left")]


def toolbox(log: Path, timeout: float = 1.0) -> MCPServerStdio:
    """The test server, answering each call within ``timeout`` or not at all (a hang guard for its start).

    Calls that must be answered get a hang guard as their bound (120 s): a loaded machine answers late.
    """
    return MCPServerStdio(sys.executable, [TOOLBOX, "--log", str(log)], env=ENV, timeout=timeout, connect_timeout=120.0)


def refund_keys(log: Path, invoice: str) -> list[str]:
    """The idempotency key of each refund of ``invoice`` the server made, in order."""
    return [line.split("key=")[1] for line in log.read_text().splitlines() if line.startswith(f"refund {invoice}")]


async def test_a_journaled_call_without_an_answer_in_time_stays_unknown_and_follows_the_resume_policy(
    tmp_path: Path,
) -> None:
    """One story for an unknown outcome: a timed-out call is not repeated by a resume unless the policy says so."""
    log, db = tmp_path / "calls.log", str(tmp_path / "runs.db")
    journals: list[SQLiteJournal] = []

    def build(steps: list[object], timeout: float = 1.0, **options: object) -> Agent:
        journals.append(SQLiteJournal(db))
        runtime = JournalRuntime(journals[-1], **options)  # type: ignore[arg-type]
        server = toolbox(log, timeout)
        return Agent("x", name="billing", model=ScriptedModel(steps), tools=[server], runtime=runtime)  # type: ignore[arg-type]

    try:
        with pytest.raises(ToolOutcomeUnknown, match="had the call but did not answer within 1s"):
            await build([Call("refund", {"invoice": "HANG-7"}), "unused"]).run("refund HANG-7", session_id="s-1")
        assert len(refund_keys(log, "HANG-7")) == 1
        with pytest.raises(ToolOutcomeUnknown, match="on_unknown_tool_outcome='retry'"):
            await build(["unused"]).resume("s-1")  # "fail", the default: the refund is not made again
        assert len(refund_keys(log, "HANG-7")) == 1
        result = await build(["Refunded."], 120.0, on_unknown_tool_outcome="retry").resume("s-1")  # answered
    finally:
        for journal in journals:
            await journal.aclose()
    assert result.output == "Refunded."
    keys = refund_keys(log, "HANG-7")
    assert len(keys) == 2 and keys[0] == keys[1] != "None"  # sent again under its one idempotency key


@pytest.mark.parametrize("policy", ["fail", "retry"])
async def test_a_retry_a_hook_asks_for_after_an_unknown_outcome_follows_the_journal_policy(
    policy: str, tmp_path: Path
) -> None:
    """The ladder alone stops on ToolOutcomeUnknown; a hook that says retry gets on_unknown_tool_outcome."""

    def retry_unknown(exc: BaseException, ctx: object) -> ErrorClassification | None:
        return ErrorClassification(ErrorSeverity.RETRIABLE) if isinstance(exc, ToolOutcomeUnknown) else None

    log = tmp_path / "calls.log"
    journal = SQLiteJournal(tmp_path / "runs.db")
    server = toolbox(log)
    agent = Agent(
        "x",
        model=ScriptedModel([Call("refund", {"invoice": "HANG-8"}), "Refunded."]),
        tools=[server],
        architecture=ToolLoop(recovery=Recovery(sleep=RecordedSleeps())),
        classify_error=retry_unknown,
        runtime=JournalRuntime(journal, on_unknown_tool_outcome=policy),  # type: ignore[arg-type]
    )
    events: list[object] = []
    try:
        async with agent.stream("refund HANG-8") as stream:
            async for ev in stream:
                events.append(ev)
                if isinstance(ev, RecoveryRetry):
                    server.timeout = 120.0  # a retried call is answered: its bound is a hang guard
    finally:
        await journal.aclose()
    retries = [ev.operation for ev in events if isinstance(ev, RecoveryRetry)]
    keys = refund_keys(log, "HANG-8")
    result = events[-1].result  # type: ignore[attr-defined]
    if policy == "fail":  # the journal will not send it again: ToolOutcomeUnknown, critical, a report
        assert len(keys) == 1 and result.status == "critical"  # each retry the hook asked for was refused
        assert len(retries) >= 1 and set(retries) == {"tool:refund"}
        [report] = [ev for ev in events if isinstance(ev, RecoveryReport)]
        assert "ToolOutcomeUnknown" in str(report.report)
    else:  # sent again under the same idempotency key
        assert len(keys) == 2 and keys[0] == keys[1] != "None" and result.output == "Refunded."
        assert retries == ["tool:refund"]
