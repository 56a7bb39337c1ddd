"""Agents calling the tools of real MCP servers (built with the ``mcp`` package) over stdio and HTTP."""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path

import pytest

from jeeves_router import Agent
from jeeves_router.errors import ToolError, ToolOutcomeUnknown, UsageError
from jeeves_router.events import ToolCalled, ToolResult
from jeeves_router.journal import JournalRuntime, SQLiteJournal
from jeeves_router.mcp import MCPServerHTTP, MCPServerStdio
from jeeves_router.testing import Call, FunctionModel, ScriptedModel, capture_events
from jeeves_router.tools import tool
from tests.mcp_helpers import ENV, TOOLBOX, alive, child_pids, http_process, wait_for_text
from tests.task_helpers import warnings_of_this_test

pytest.importorskip("mcp")
pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("no_process_left")]


def toolbox(log: Path | None = None, *extra: str, **options: object) -> MCPServerStdio:
    args = [TOOLBOX, *(["--log", str(log)] if log else []), *extra]
    for bound in ("timeout", "connect_timeout"):  # hang guards unless a test sets one: Python starts slowly under load
        options.setdefault(bound, 120.0)
    return MCPServerStdio(sys.executable, args, env=ENV, name="toolbox", **options)  # type: ignore[arg-type]


def results(events: list[object]) -> dict[str, ToolResult]:
    return {ev.tool: ev for ev in events if isinstance(ev, ToolResult)}


async def test_agent_calls_stdio_tools_with_schemas_from_the_server(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    model = ScriptedModel(
        [
            [
                Call("add", {"a": 2, "b": 40}),
                Call("lookup_invoice", {"invoice": "INV-7"}),
                Call("docs_search", {"query": "x"}),
            ],
            Call("pid"),
            "Done.",
        ]
    )
    agent = Agent("You use tools.", name="helper", model=model, tools=[toolbox(log)])
    events = await capture_events(agent, "charged twice?")
    by_tool = results(events)
    assert by_tool["add"].content == "42" and not by_tool["add"].is_error
    assert by_tool["lookup_invoice"].content == "invoice INV-7: 42.00 EUR, charged twice"
    assert by_tool["docs_search"].content == "no docs for 'x'"  # 'docs.search' on the server
    called = [ev for ev in events if isinstance(ev, ToolCalled)]
    assert [c.tool for c in called] == ["add", "lookup_invoice", "docs_search", "pid"]
    specs = {t.name: t for t in model.requests[0].tools}
    assert specs["add"].parameters["properties"]["a"]["type"] == "integer"
    assert specs["add"].parameters["required"] == ["a", "b"]
    assert specs["add"].description == "Add two integers."
    done = events[-1]
    assert done.kind == "run.completed"
    assert done.result.output == "Done." and done.result.usage.requests == 3  # type: ignore[attr-defined]
    server_pid = int(by_tool["pid"].content)
    assert not alive(server_pid)  # the process lived as long as the run
    assert log.read_text().count("lookup_invoice INV-7") == 1


async def test_tool_errors_unknown_tools_and_bad_arguments_go_back_to_the_model() -> None:
    model = ScriptedModel([[Call("fail", {"reason": "no refunds"}), Call("add", {"a": "two"}), Call("nope")], "Sorry."])
    agent = Agent("x", model=model, tools=[toolbox()])
    by_tool = results(await capture_events(agent, "go"))
    assert by_tool["fail"].is_error and "cannot do that: no refunds" in by_tool["fail"].content
    assert by_tool["add"].is_error and "add" in by_tool["add"].content
    assert by_tool["nope"].is_error and "unknown tool 'nope'" in by_tool["nope"].content


async def test_a_server_crashing_in_a_call_fails_the_run_the_outcome_unknown(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    model = ScriptedModel([Call("crash"), Call("add", {"a": 1, "b": 1}), "The tool server is down."])
    agent = Agent("x", model=model, tools=[toolbox(log)])
    events: list[object] = []
    with pytest.raises(ToolError, match="whether it ran is unknown, so it was not sent again") as raised:
        async with agent.stream("go") as stream:
            async for ev in stream:
                events.append(ev)
    assert str(raised.value).startswith("crash: the connection to MCP server 'toolbox' ended while the call was")
    assert not [ev for ev in events if isinstance(ev, ToolResult)]  # the model never sees it, so cannot call again
    assert log.read_text().count("crash") == 1


@pytest.mark.parametrize("tool_name", ["hang", "freeze"])
async def test_a_call_without_an_answer_in_time_is_an_unknown_outcome_and_the_server_is_stopped(
    tool_name: str, tmp_path: Path
) -> None:
    """``hang`` never answers; ``freeze`` blocks the server's whole process (it stops reading).

    The server had the call: it may have run, as for a server that died in it, so the model is
    not told (it could call the tool again) and the run fails on a critical ToolOutcomeUnknown.
    """
    log = tmp_path / "calls.log"
    model = ScriptedModel([Call(tool_name), Call("pid"), "It timed out."])
    agent = Agent("x", model=model, tools=[toolbox(log, timeout=1.0)])
    events: list[object] = []
    with pytest.raises(ToolOutcomeUnknown) as raised:
        async with agent.stream("go") as stream:
            async for ev in stream:
                events.append(ev)
    assert str(raised.value) == (
        f"{tool_name}: MCP server 'toolbox' had the call but did not answer within 1s; "
        "whether it ran is unknown, so it was not sent again"
    )
    assert raised.value.severity == "critical" and isinstance(raised.value, ToolError)
    meta = {"mcp_server": "toolbox", "tool": tool_name, "outcome": "unknown", "timed_out": True}
    assert raised.value.metadata == meta
    assert not [ev for ev in events if isinstance(ev, ToolResult)] and len(model.requests) == 1
    started = [int(line.split()[1]) for line in log.read_text().splitlines() if line.startswith("started")]
    assert len(started) == 1 and not alive(started[0])
    assert log.read_text().count(tool_name) == 1


@pytest.mark.parametrize(
    ("tool_name", "repeatable"), [("hang", ["hang"]), ("slow_read", "hinted")], ids=["named", "hinted"]
)
async def test_a_repeatable_call_without_an_answer_comes_back_to_the_model(
    tool_name: str, repeatable: object, tmp_path: Path
) -> None:
    """A tool harmless to call twice (a fetch): its timeout is an error result the model can act on."""
    log = tmp_path / "calls.log"
    model = ScriptedModel([Call(tool_name), Call("pid"), "The read timed out."])
    server = toolbox(log, timeout=1.0, repeatable=repeatable)
    agent = Agent("x", model=model, tools=[server])
    events: list[object] = []
    async with agent.stream("go") as stream:
        async for ev in stream:
            events.append(ev)
            if isinstance(ev, ToolResult) and ev.tool == tool_name:
                server.timeout = 120.0  # the pid call's bound is a hang guard: a loaded machine answers late
    by_tool = results(events)
    assert by_tool[tool_name].is_error
    assert by_tool[tool_name].content == (
        f"{tool_name} failed: MCP server 'toolbox' did not answer within 1s (it may be called again)"
    )
    assert not by_tool["pid"].is_error  # the server went on serving
    assert len(model.requests) == 3 and getattr(events[-1], "kind", None) == "run.completed"


async def test_hints_are_only_taken_when_asked_and_repeatable_is_checked(tmp_path: Path) -> None:
    model = ScriptedModel([Call("slow_read"), "unused"])
    agent = Agent("x", model=model, tools=[toolbox(tmp_path / "calls.log", timeout=1.0)])
    with pytest.raises(ToolOutcomeUnknown):  # read-only by the server's word, but not trusted by default
        await agent.run("go")
    with pytest.raises(UsageError, match="repeatable must be tool names or 'hinted'"):
        toolbox(None, repeatable="hang")


async def test_malformed_answers_are_tool_errors() -> None:
    model = ScriptedModel([Call("total"), "Could not sum it."])
    agent = Agent("x", model=model, tools=[toolbox(None, "--malformed")])
    by_tool = results(await capture_events(agent, "go"))
    assert by_tool["total"].is_error
    assert "MCP server 'toolbox' answered with malformed data" in by_tool["total"].content


async def test_a_server_that_cannot_start_fails_the_run_clearly() -> None:
    model = ScriptedModel(["unused"])
    missing = MCPServerStdio("/nonexistent/mcp-server", name="ghost")
    agent = Agent("x", model=model, tools=[missing])
    with pytest.raises(ToolError, match="MCP server 'ghost' could not be started: FileNotFoundError"):
        await agent.run("go")
    silent = MCPServerStdio(sys.executable, ["-c", "import sys; sys.stdin.read()"], name="silent", connect_timeout=1)
    agent = Agent("x", model=model, tools=[silent])
    with pytest.raises(ToolError, match=r"MCP server 'silent' did not start within 1s \(connect_timeout\)"):
        await agent.run("go")
    assert model.requests == []  # no model call before the tools are known


async def test_async_with_keeps_one_process_for_many_runs(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    server = toolbox(log)
    agent = Agent("x", model=ScriptedModel([Call("pid"), "a", Call("pid"), "b"]), tools=[server])
    async with server:
        assert server.is_open and {t.name for t in server.tools} >= {"add", "pid"}
        first = results(await capture_events(agent, "one"))["pid"].content
        second = results(await capture_events(agent, "two"))["pid"].content
        assert first == second and alive(int(first))
    assert not server.is_open and not alive(int(first))
    # without the block, each run starts its own process
    agent = Agent("x", model=ScriptedModel([Call("pid"), "a", Call("pid"), "b"]), tools=[server])
    one = results(await capture_events(agent, "one"))["pid"].content
    two = results(await capture_events(agent, "two"))["pid"].content
    assert one != two
    assert sum(line.startswith("started") for line in log.read_text().splitlines()) == 3


async def test_a_call_outside_a_run_is_an_error_outcome() -> None:
    server = toolbox()
    outcome = await server.call("add", {"a": 1, "b": 2})
    assert outcome.is_error and "is not open" in outcome.content


async def test_tool_prefix_allowed_tools_and_name_clashes() -> None:
    @tool
    def add(a: int, b: int) -> int:
        """A local add."""
        return -1

    clash = Agent("x", model=ScriptedModel(["unused"]), tools=[add, toolbox()])
    with pytest.raises(UsageError, match=r"has a tool named 'add'.*tool_prefix"):
        await clash.run("go")
    model = ScriptedModel([[Call("add", {"a": 1, "b": 2}), Call("tb_add", {"a": 1, "b": 2})], "ok"])
    agent = Agent("x", model=model, tools=[add, toolbox(tool_prefix="tb_", allowed_tools=["add", "pid"])])
    by_tool = results(await capture_events(agent, "go"))
    assert by_tool["add"].content == "-1" and by_tool["tb_add"].content == "3"
    assert sorted(t.name for t in model.requests[0].tools) == ["add", "tb_add", "tb_pid"]


async def test_closing_a_stream_early_stops_the_server_without_warnings() -> None:
    model = ScriptedModel([Call("pid"), "never reached"])
    agent = Agent("x", model=model, tools=[toolbox()])
    with warnings_of_this_test("error"):
        async with agent.stream("go") as events:
            async for ev in events:
                if isinstance(ev, ToolResult):
                    pid = int(ev.content)
                    break
        assert not alive(pid)


async def test_a_journaled_mcp_call_is_not_repeated_on_resume(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    db = str(tmp_path / "runs.db")

    class Crash(Exception):
        pass

    def build(steps: list[object]) -> tuple[Agent, ScriptedModel]:
        model = ScriptedModel(steps)  # type: ignore[arg-type]
        runtime = JournalRuntime(SQLiteJournal(db))
        return Agent("x", name="billing", model=model, tools=[toolbox(log)], runtime=runtime), model

    agent, _ = build([Call("lookup_invoice", {"invoice": "INV-7"}), Crash("the process died")])
    with pytest.raises(Crash):
        await agent.run("charged twice", session_id="s-1")
    assert log.read_text().count("lookup_invoice INV-7") == 1

    # a new process: the first model turn and the tool call come from the journal
    agent, model = build(["Refunded INV-7."])
    result = await agent.resume("s-1")
    assert result.output == "Refunded INV-7." and result.status == "ok"
    assert log.read_text().count("lookup_invoice INV-7") == 1  # not called again
    assert len(model.requests) == 1  # only the turn after the tool ran live
    tool_msg = model.requests[0].messages[-1]
    assert "invoice INV-7: 42.00 EUR" in tool_msg.parts[0].content  # type: ignore[union-attr]


async def test_streamable_http_server(tmp_path: Path) -> None:
    log = tmp_path / "calls.log"
    async with http_process(TOOLBOX, "--http", "{port}", "--log", str(log)) as (proc, port):
        server = MCPServerHTTP(f"http://127.0.0.1:{port}/mcp", headers={"x-test": "1"}, timeout=120.0)
        assert server.name == f"127.0.0.1:{port}"
        first = [Call("add", {"a": 20, "b": 22}), Call("fail", {"reason": "http"})]
        script: list[object] = [first, Call("crash"), "unused"]

        def answer(request: object) -> object:
            return script.pop(0)

        hanging = Agent("x", model=ScriptedModel([Call("hang"), "unused"]), tools=[server])
        server.timeout = 1.0
        with pytest.raises(ToolOutcomeUnknown, match=f"MCP server '127.0.0.1:{port}' had the call but did not answer"):
            await hanging.run("go")
        server.timeout = 120.0
        agent = Agent("x", model=FunctionModel(answer), tools=[server])  # type: ignore[arg-type]
        events: list[object] = []
        with pytest.raises(ToolError, match=f"crash: the connection to MCP server '127.0.0.1:{port}' ended"):
            async with agent.stream("go") as stream:
                async for ev in stream:
                    events.append(ev)
        by_tool = results(events)
        assert by_tool["add"].content == "42" and not by_tool["add"].is_error
        assert by_tool["fail"].is_error and "cannot do that: http" in by_tool["fail"].content
        assert "crash" not in by_tool  # whether it ran is unknown: the run fails, the model is not told to retry
        await proc.wait()
        assert proc.returncode == 3  # the crash tool killed it
    down = Agent("x", model=ScriptedModel(["unused"]), tools=[MCPServerHTTP(f"http://127.0.0.1:{port}/mcp")])
    with pytest.raises(ToolError, match="could not be started"):
        await down.run("go")


def test_bad_options_are_usage_errors() -> None:
    with pytest.raises(UsageError, match="timeout must be a positive number"):
        MCPServerStdio("x", timeout=0)
    with pytest.raises(UsageError, match="args must be a list"):
        MCPServerStdio("python", "server.py")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="http:// or https:// URL"):
        MCPServerHTTP("127.0.0.1:8000/mcp")
    with pytest.raises(UsageError, match="tool_prefix"):
        MCPServerStdio("x", tool_prefix="a.b")


async def test_cancelling_a_run_stops_a_server_stuck_in_a_call(tmp_path: Path) -> None:
    import anyio

    log = tmp_path / "calls.log"
    agent = Agent("x", model=ScriptedModel([Call("hang"), "unused"]), tools=[toolbox(log, timeout=600)])
    async with anyio.create_task_group() as tg:
        tg.start_soon(agent.run, "go")
        with anyio.fail_after(60):
            await wait_for_text(log, "hang")
        tg.cancel_scope.cancel()  # the run is inside a 600 s call: cancelling it must not wait for that
    started = [int(line.split()[1]) for line in log.read_text().splitlines() if line.startswith("started")]
    assert len(started) == 1 and not alive(started[0])


async def test_a_durable_call_sends_its_idempotency_key_the_same_on_a_retried_resume(tmp_path: Path) -> None:
    import anyio

    from jeeves_router.journal.records import ToolStartedRecord
    from jeeves_router.mcp import IDEMPOTENCY_META_KEY

    log, db = tmp_path / "calls.log", str(tmp_path / "runs.db")

    journals: list[SQLiteJournal] = []

    def build(steps: list[object], **options: object) -> Agent:
        journals.append(SQLiteJournal(db))
        runtime = JournalRuntime(journals[-1], **options)  # type: ignore[arg-type]
        return Agent("x", name="billing", model=ScriptedModel(steps), tools=[toolbox(log)], runtime=runtime)  # type: ignore[arg-type]

    async with anyio.create_task_group() as tg:  # the refund is cut off mid-call: its outcome is unknown
        first = build([Call("refund", {"invoice": "HANG-7"}), "unused"])
        tg.start_soon(partial(first.run, "refund HANG-7", session_id="s-1"))
        with anyio.fail_after(60):
            await wait_for_text(log, "refund HANG-7")
        tg.cancel_scope.cancel()
    result = await build(["Refunded."], on_unknown_tool_outcome="retry").resume("s-1")
    assert result.output == "Refunded."
    keys = [line.split("key=")[1] for line in log.read_text().splitlines() if line.startswith("refund HANG-7")]
    journals.append(SQLiteJournal(db))
    started = [e.record for e in await journals[-1].read("s-1") if isinstance(e.record, ToolStartedRecord)]
    for journal in journals:
        await journal.aclose()
    assert len(keys) == 2 and keys[0] == keys[1] == started[0].idempotency_key  # one key: the server can dedupe
    assert IDEMPOTENCY_META_KEY == "jeeves-router/idempotency-key"

    plain = Agent("x", model=ScriptedModel([Call("refund", {"invoice": "INV-8"}), "Done."]), tools=[toolbox(log)])
    await plain.run("refund INV-8")  # no durable runtime: no key to send
    assert "refund INV-8 key=None" in log.read_text()


async def test_the_leak_check_sees_a_live_child_process() -> None:
    """The autouse check above would fail for a server left running: it sees child processes."""
    import anyio

    before = child_pids()
    proc = await anyio.open_process([sys.executable, "-c", "import sys; sys.stdin.read()"])
    try:
        assert child_pids() - before == {proc.pid} and alive(proc.pid)
    finally:
        await proc.aclose()  # closes stdin: it exits, and is reaped
    assert child_pids() - before == set()


async def test_a_routed_specialist_with_mcp_tools_and_concurrent_runs_sharing_a_server(tmp_path: Path) -> None:
    import anyio

    from jeeves_router import Router, RouterRoute

    log = tmp_path / "calls.log"
    server = toolbox(log)

    def desk(n: int) -> Agent:
        billing = Agent(
            "b", name="billing", model=ScriptedModel([Call("add", {"a": n, "b": 1}), f"sum {n + 1}"]), tools=[server]
        )
        return Agent(
            "d",
            name="desk",
            model=ScriptedModel(["route: billing\nconfidence: 0.9"]),
            architecture=Router([RouterRoute("billing", billing)]),
        )

    outputs: dict[int, str | None] = {}
    paths: list[tuple[str, ...]] = []

    async def one(n: int) -> None:
        events = await capture_events(desk(n), "charged twice")
        paths.extend(ev.path for ev in events if isinstance(ev, ToolResult))
        done = events[-1]
        assert done.kind == "run.completed"
        outputs[n] = done.result.output  # type: ignore[attr-defined]
        assert done.result.usage.requests == 3  # type: ignore[attr-defined]

    async with anyio.create_task_group() as tg:
        for n in range(3):
            tg.start_soon(one, n)
    assert outputs == {0: "sum 1", 1: "sum 2", 2: "sum 3"}
    assert paths == [("desk", "billing")] * 3
    assert not server.is_open
    # the runs reached the server while the first one was starting it: they all used that process
    assert sum(line.startswith("started") for line in log.read_text().splitlines()) == 1


async def test_a_stream_iterated_under_the_consumers_own_cancel_scope() -> None:
    """The connection lives in the stream's host task, so the consumer's scopes nest as written."""
    import anyio

    agent = Agent("x", model=ScriptedModel([Call("pid"), "never reached"]), tools=[toolbox()])
    with warnings_of_this_test("error"):
        async with agent.stream("go") as events:
            with anyio.fail_after(120):
                async for ev in events:
                    if isinstance(ev, ToolResult):
                        pid = int(ev.content)
                        break
            assert alive(pid)  # the run is paused, not over
    assert not alive(pid)


async def test_an_error_in_the_consumers_stream_block_keeps_its_type() -> None:
    agent = Agent("x", model=ScriptedModel([Call("pid"), "never reached"]), tools=[toolbox()])
    with pytest.raises(KeyError, match="mine"):
        async with agent.stream("go") as events:
            async for ev in events:
                if isinstance(ev, ToolResult):
                    raise KeyError("mine")


async def test_the_agent_running_a_handoff_chain_calls_its_mcp_tools() -> None:
    other = Agent("o", name="other", model=ScriptedModel(["unused"]))
    model = ScriptedModel([Call("add", {"a": 2, "b": 2}), "four"])
    triage = Agent("t", name="triage", model=model, tools=[toolbox()], handoffs=[other])
    events = await capture_events(triage, "2+2?")
    assert results(events)["add"].content == "4"
    assert events[-1].result.output == "four"  # type: ignore[attr-defined]
    assert {t.name for t in model.requests[0].tools} >= {"add", "transfer_to_other"}
