"""``repeatable`` tools: a framework retry runs them again; an unknown outcome of theirs is shown to the model.

A retried specialist's completed calls are answered from the attempt ledger (a refund is not
paid twice), but a read answered so would hand the retry the abandoned attempt's stale
value: a tool marked ``repeatable`` is executed again. A local tool that raises
``ToolOutcomeUnknown`` stops the run like an MCP tool's call left without an answer, unless
it is repeatable.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from jeeves_router import Agent, Router, RouterRoute, tool
from jeeves_router.architectures.capabilities.architecture import Capabilities, Capability
from jeeves_router.errors import ToolOutcomeUnknown
from jeeves_router.events import ToolResult
from jeeves_router.models.base import ModelRequest
from jeeves_router.recovery import Recovery
from jeeves_router.testing import Call, FunctionModel, RecordedSleeps, Reply, ScriptedModel, StaticClassifier
from jeeves_router.tools import Tool

pytestmark = pytest.mark.anyio


def tool_results(request: ModelRequest) -> list[tuple[str, str]]:
    """The (tool, content) results the model has been shown so far."""
    return [(p.name, p.content) for m in request.messages if m.role == "tool" for p in m.parts]  # type: ignore[union-attr]


def retried_clerk(tools: list[Tool | object], seen: list[str], status: str, refund: str) -> Agent:
    """Attempt 1 reads the status, refunds, then its model call times out; attempt 2 does the same and answers.

    ``seen`` gets the status each attempt was shown.
    """
    attempts: list[int] = []

    def turn(request: ModelRequest) -> Reply:
        done = tool_results(request)
        if not done:
            attempts.append(1)
            return Reply(calls=[Call(status, {"invoice": "INV-7"})])
        if len(done) == 1:
            seen.append(done[0][1])
            return Reply(calls=[Call(refund, {"invoice": "INV-7"})])
        if len(attempts) == 1:
            raise TimeoutError("read timed out")
        return Reply(text=f"Refunded INV-7 ({seen[-1]}).")

    return Agent("Billing.", name="billing", model=FunctionModel(turn, name="billing"), tools=tools)


def local_tools(statuses: list[str], refunds: list[str]) -> list[Tool | object]:
    """A repeatable ``get_status`` that reports how many times it ran, and a plain ``refund``."""

    @tool(repeatable=True)
    def get_status(invoice: str) -> str:
        """The invoice's refund status (a read)."""
        statuses.append(invoice)
        return f"status #{len(statuses)}"

    @tool
    def refund(invoice: str) -> str:
        """Refund an invoice."""
        refunds.append(invoice)
        return f"refunded {invoice}"

    return [get_status, refund]


def routed(clerk: Agent) -> Agent:
    routes = [RouterRoute("billing", clerk, "payments")]
    router = Router(routes, classifier=StaticClassifier("billing"), recovery=Recovery(sleep=RecordedSleeps()))
    return Agent("Desk.", name="desk", architecture=router)


def planned(clerk: Agent) -> Agent:
    plan = json.dumps({"steps": [{"capability": "billing", "task": "refund INV-7"}]})

    def orchestrator(request: ModelRequest) -> Reply:
        return Reply(text="yes" if "Capability:" in (request.system or "") else plan)

    caps = Capabilities([Capability("billing", clerk, "refunds")])
    return Agent("Accounts.", name="accounts", model=FunctionModel(orchestrator, name="o"), architecture=caps)


@pytest.mark.parametrize("retrying", [routed, planned], ids=["router", "capabilities"])
async def test_a_retry_reads_a_repeatable_tool_again_and_still_refunds_once(retrying: Callable[[Agent], Agent]) -> None:
    statuses: list[str] = []
    refunds: list[str] = []
    seen: list[str] = []
    agent = retrying(retried_clerk(local_tools(statuses, refunds), seen, "get_status", "refund"))
    result = await agent.run("refund INV-7")
    assert (result.status, result.output) == ("ok", "Refunded INV-7 (status #2).")
    assert statuses == ["INV-7", "INV-7"]  # the read ran again: the retry was shown the fresh status
    assert seen == ["status #1", "status #2"]
    assert refunds == ["INV-7"]  # the refund is the first attempt's, answered from the ledger


@pytest.mark.usefixtures("no_process_left")
async def test_a_retry_calls_a_repeatable_mcp_tool_again_and_a_plain_one_once(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    from jeeves_router.mcp import MCPServerStdio
    from tests.mcp_helpers import ENV, TOOLBOX

    log = tmp_path / "calls.log"
    server = MCPServerStdio(
        sys.executable,
        [TOOLBOX, "--log", str(log)],
        env=ENV,
        name="toolbox",
        timeout=120.0,
        connect_timeout=120.0,
        repeatable={"lookup_invoice"},
    )
    seen: list[str] = []
    result = await routed(retried_clerk([server], seen, "lookup_invoice", "refund")).run("refund INV-7")
    assert result.status == "ok"
    calls = [line.split(" key=")[0] for line in log.read_text().splitlines() if not line.startswith("started")]
    assert calls == ["lookup_invoice INV-7", "refund INV-7", "lookup_invoice INV-7"]


async def test_an_mcp_tool_answers_repeatable_from_its_servers_setting() -> None:
    pytest.importorskip("mcp")
    from jeeves_router.mcp import MCPServerStdio
    from jeeves_router.mcp._tool import MCPTool

    def repeatable(setting: object, name: str, *, hinted: bool) -> bool:
        server = MCPServerStdio(sys.executable, [], name="s", repeatable=setting)  # type: ignore[arg-type]
        t = MCPTool(server, name, "", {})
        t.hinted_repeatable = hinted
        return t.repeatable

    assert repeatable({"read"}, "read", hinted=False) and not repeatable({"read"}, "write", hinted=True)
    assert repeatable("hinted", "read", hinted=True) and not repeatable("hinted", "read", hinted=False)
    assert not repeatable((), "read", hinted=True)
    from jeeves_router.architectures.handoffs.tools import GuardedTool

    server = MCPServerStdio(sys.executable, [], name="s", repeatable={"read"})
    assert GuardedTool(MCPTool(server, "read", "", {}), lambda o: o).repeatable  # a guard asks the tool it wraps


def unknown_tool(calls: list[str], *, repeatable: bool) -> Tool:
    def charge(invoice: str) -> str:
        """Charge an invoice at a payment provider that may not answer."""
        calls.append(invoice)
        raise ToolOutcomeUnknown(f"the provider did not answer for {invoice}")

    return Tool(charge, repeatable=repeatable)


async def test_a_local_tools_unknown_outcome_stops_the_run_unshown_to_the_model() -> None:
    calls: list[str] = []
    model = ScriptedModel([Call("charge", {"invoice": "INV-7"}), Call("charge", {"invoice": "INV-7"}), "Charged."])
    agent = Agent("x", model=model, tools=[unknown_tool(calls, repeatable=False)])
    events: list[object] = []
    with pytest.raises(ToolOutcomeUnknown) as raised:
        async with agent.stream("charge INV-7") as stream:
            async for ev in stream:
                events.append(ev)
    assert str(raised.value) == "the provider did not answer for INV-7"
    assert raised.value.severity == "critical" and raised.value.metadata == {"tool": "charge"}
    assert calls == ["INV-7"] and len(model.requests) == 1  # never shown to the model, so never called again
    assert not [ev for ev in events if isinstance(ev, ToolResult)]


async def test_a_local_tools_unknown_outcome_under_recovery_stops_without_a_retry() -> None:
    calls: list[str] = []
    model = ScriptedModel([Call("charge", {"invoice": "INV-7"}), "Charged."])
    clerk = Agent("x", name="billing", model=model, tools=[unknown_tool(calls, repeatable=False)])
    result = await routed(clerk).run("charge INV-7")
    assert result.status == "critical" and result.report is not None
    assert result.report["error"] == {"type": "ToolOutcomeUnknown"} and result.report["attempts"]["route:billing"] == 1
    assert calls == ["INV-7"] and len(model.requests) == 1  # no retry, and the model never saw it


async def test_a_repeatable_local_tools_unknown_outcome_comes_back_to_the_model() -> None:
    calls: list[str] = []
    model = ScriptedModel([Call("charge", {"invoice": "INV-7"}), "The provider did not answer."])
    agent = Agent("x", model=model, tools=[unknown_tool(calls, repeatable=True)])
    result = await agent.run("charge INV-7")
    assert (result.status, result.output) == ("ok", "The provider did not answer.")
    assert tool_results(model.requests[1]) == [
        ("charge", "charge failed: ToolOutcomeUnknown (it may be called again)")  # its message: expose_details
    ]
    assert calls == ["INV-7"]


def test_repeatable_must_be_a_bool() -> None:
    from jeeves_router.errors import UsageError

    with pytest.raises(UsageError, match="repeatable must be True or False"):
        tool(repeatable="yes")(lambda: None)  # type: ignore[call-overload]


async def test_a_journaled_local_unknown_outcome_stays_unknown_and_follows_the_resume_policy(tmp_path: Path) -> None:
    """As for an MCP call: a resume does not make the call again unless ``on_unknown_tool_outcome`` says so."""
    from jeeves_router.journal import JournalRuntime, SQLiteJournal, current_idempotency_key

    keys: list[str | None] = []

    @tool
    def charge(invoice: str) -> str:
        """Charge an invoice; the provider leaves the first charge without an answer."""
        keys.append(current_idempotency_key())
        if len(keys) == 1:
            raise ToolOutcomeUnknown(f"the provider did not answer for {invoice}")
        return f"charged {invoice}"

    db = str(tmp_path / "runs.db")
    journals: list[SQLiteJournal] = []

    def build(steps: list[object], **options: object) -> Agent:
        journals.append(SQLiteJournal(db))
        runtime = JournalRuntime(journals[-1], **options)  # type: ignore[arg-type]
        return Agent("x", name="billing", model=ScriptedModel(steps), tools=[charge], runtime=runtime)  # type: ignore[arg-type]

    try:
        with pytest.raises(ToolOutcomeUnknown, match="the provider did not answer for INV-7"):
            await build([Call("charge", {"invoice": "INV-7"}), "unused"]).run("charge INV-7", session_id="s-1")
        with pytest.raises(ToolOutcomeUnknown, match="on_unknown_tool_outcome='retry'"):
            await build(["unused"]).resume("s-1")  # "fail", the default: not charged again
        assert len(keys) == 1
        result = await build(["Charged."], on_unknown_tool_outcome="retry").resume("s-1")
    finally:
        for journal in journals:
            await journal.aclose()
    assert result.output == "Charged."
    assert len(keys) == 2 and keys[0] == keys[1] is not None  # called again under its one idempotency key
