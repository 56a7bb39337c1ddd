"""`jeeves-router mcp module:attr`: a router desk served as an MCP server, called by MCP clients."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from jeeves_router import Agent
from jeeves_router.errors import UsageError
from jeeves_router.events import ToolResult
from jeeves_router.journal import JournalRuntime, SQLiteJournal
from jeeves_router.journal.records import StepRecord
from jeeves_router.mcp import MCPServerHTTP, MCPServerStdio
from jeeves_router.mcp.server import load_agent, router_server
from jeeves_router.mcp.server import serve as mcp_serve
from jeeves_router.messages import ToolResultPart
from jeeves_router.models.base import ModelRequest
from jeeves_router.testing import Call, FunctionModel, Reply, ScriptedModel, capture_events
from tests.journal_helpers import Wrapped
from tests.mcp_helpers import ENV, ROOT, http_process

pytest.importorskip("mcp")
pytestmark = pytest.mark.usefixtures("no_process_left")  # conftest: no served desk outlives its test

CLI = ["-m", "jeeves_router.cli", "mcp"]


@pytest.mark.anyio
async def test_the_mcp_client_calls_a_desk_served_over_stdio() -> None:
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable, args=[*CLI, "tests.mcp_servers.desk:desk"], env=ENV, cwd=str(ROOT)
    )
    async with Client(params) as client:
        listed = await client.list_tools()
        assert [t.name for t in listed.tools] == ["ask"]
        ask = listed.tools[0]
        assert ask.input_schema["required"] == ["request"]
        assert "Customer support desk" in (ask.description or "")
        assert ask.output_schema is not None and "route" in ask.output_schema["properties"]

        billed = await client.call_tool("ask", {"request": "I was charged twice", "session_id": "s-9"})
        assert not billed.is_error
        assert billed.content[0].text == "Refund issued."  # type: ignore[union-attr]
        decision = billed.structured_content
        assert decision["route"] == "billing" and decision["confidence"] == 0.9 and decision["status"] == "ok"
        assert decision["session_id"] == "s-9" and decision["specialist_session_id"] == "s-9__route_billing"
        assert decision["input_tokens"] == 20  # classifier + specialist

        fallback = await client.call_tool("ask", {"request": "hello there"})
        assert fallback.content[0].text == "Happy to help."  # type: ignore[union-attr]
        assert fallback.structured_content["used_fallback"] is True
        assert fallback.structured_content["fallback_reason"] == "low_confidence"


@pytest.mark.anyio
async def test_an_unresolved_run_is_an_error_result_with_its_decision() -> None:
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable, args=[*CLI, "tests.mcp_servers.desk:make_unresolved_desk"], env=ENV, cwd=str(ROOT)
    )
    async with Client(params) as client:
        res = await client.call_tool("ask", {"request": "hello"})
    assert res.is_error
    assert res.content[0].text == "no answer (status: unresolved)"  # type: ignore[union-attr]
    assert res.structured_content["status"] == "unresolved" and res.structured_content["output"] is None


@pytest.mark.anyio
async def test_an_agent_uses_a_desk_served_over_http_as_a_tool() -> None:
    args = ("-m", "jeeves_router.cli", "mcp", "tests.mcp_servers.desk:desk", "--transport", "http", "--port", "{port}")
    async with http_process(*args) as (_, port):
        desk = MCPServerHTTP(f"http://127.0.0.1:{port}/mcp", name="desk", tool_prefix="desk_")
        model = ScriptedModel([Call("desk_ask", {"request": "the API returns error 500"}), "They say: retry."])
        assistant = Agent("You delegate support questions.", model=model, tools=[desk])
        events = await capture_events(assistant, "help me with a 500")
    (result,) = [ev for ev in events if isinstance(ev, ToolResult)]
    assert result.content == "Retry with backoff." and not result.is_error


async def _ask_over_http(url: str, headers: dict[str, str]) -> tuple[list[int], Any]:
    """Ask the desk through the ``mcp`` SDK's streamable HTTP client: the HTTP statuses seen, the result or error."""
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    statuses: list[int] = []

    async def seen(response: httpx2.Response) -> None:
        statuses.append(response.status_code)

    async with httpx2.AsyncClient(headers=headers, event_hooks={"response": [seen]}) as http:
        try:
            async with Client(streamable_http_client(url, http_client=http)) as client:
                return statuses, await client.call_tool("ask", {"request": "I was charged twice"})
        except Exception as exc:  # the SDK's own error for a refused handshake; the statuses say why
            return statuses, exc


@pytest.mark.anyio
async def test_a_token_guards_the_desk_served_over_http(monkeypatch: pytest.MonkeyPatch) -> None:
    token = "mcp-t0ken-123456"
    monkeypatch.setenv("JR_TEST_MCP_TOKEN", token)
    args = (*CLI, "tests.mcp_servers.desk:desk", "--transport", "http", "--port", "{port}", "--token-env")
    async with http_process(*args, "JR_TEST_MCP_TOKEN") as (_, port):
        url = f"http://127.0.0.1:{port}/mcp"
        for headers in ({}, {"Authorization": "Bearer wrong-t0ken-123456"}, {"Authorization": token}):
            statuses, refused = await _ask_over_http(url, headers)
            assert statuses and set(statuses) == {401} and isinstance(refused, Exception), (headers, statuses, refused)
        statuses, answer = await _ask_over_http(url, {"Authorization": f"Bearer {token}"})
    assert 401 not in statuses and not answer.is_error, answer
    assert answer.content[0].text == "Refund issued." and answer.structured_content["route"] == "billing"


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.10", "::"])
def test_a_non_loopback_host_without_a_token_is_refused_in_one_line(host: str) -> None:
    run = subprocess.run(
        [sys.executable, *CLI, "tests.mcp_servers.desk:desk", "--transport", "http", "--host", host, "--port", "0"],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": ""},
        cwd=ROOT,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.count("\n") == 1 and f"refusing to listen on {host!r} without a token" in run.stderr
    assert "--token-env" in run.stderr


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--transport", "http", "--token-env", "NO_SUCH_VAR_XYZ"], "--token-env NO_SUCH_VAR_XYZ: the environment"),
        (["--token-env", "JR_TEST_MCP_TOKEN"], "a token guards the HTTP transport only"),
        (["--transport", "http", "--token-env", "JR_TEST_SHORT_TOKEN"], "token must be a string of at least 8"),
        (["--port", "9000"], "--port: only --transport http listens on an address; stdio talks over this process's"),
        (["--host", "0.0.0.0", "--port", "9000"], "--host and --port: only --transport http listens"),
        (["--transport", "stdio", "--host", "127.0.0.1"], "--host: only --transport http listens on an address"),
    ],
)
def test_transport_and_token_options_are_checked_before_serving(args: list[str], needle: str) -> None:
    from typer.testing import CliRunner

    from jeeves_router.cli import app

    env = {"JR_TEST_MCP_TOKEN": "mcp-t0ken-123456", "JR_TEST_SHORT_TOKEN": "short"}
    result = CliRunner().invoke(app, ["mcp", "tests.mcp_servers.desk:desk", *args], env=env)
    assert result.exit_code == 2, result.output
    assert needle in " ".join(result.output.split())


@pytest.mark.anyio
async def test_our_stdio_client_and_the_served_desk_together() -> None:
    desk = MCPServerStdio(sys.executable, [*CLI, "tests.mcp_servers.desk:desk"], env=ENV, cwd=ROOT, name="desk")
    model = ScriptedModel([Call("ask", {"request": "invoice INV-7 charged twice"}), "Refund is on its way."])
    events = await capture_events(Agent("x", model=model, tools=[desk]), "go")
    (result,) = [ev for ev in events if isinstance(ev, ToolResult)]
    assert result.content == "Refund issued."


async def _ask_in_a_new_process(journal: str, refunds: Path, key: str | None, text: str = "refund INV-1") -> Any:
    """Start ``jeeves-router mcp ... --journal journal`` over stdio, call ``ask`` once, stop the server."""
    from mcp import Client, StdioServerParameters

    args = [*CLI, "tests.mcp_servers.refund_desk:desk", "--journal", journal]
    env = {**ENV, "REFUND_LOG": str(refunds)}
    async with Client(StdioServerParameters(command=sys.executable, args=args, env=env, cwd=str(ROOT))) as client:
        meta = {"idempotency_key": key} if key is not None else None
        return await client.call_tool("ask", {"request": text}, meta=meta)


@pytest.mark.anyio
@pytest.mark.parametrize("where", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
async def test_the_mcp_command_journal_option_makes_a_retried_ask_refund_once(
    where: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """`--journal` means what `serve --journal` means: a retried key is answered once, even after a restart."""
    journal = str(tmp_path / "runs.db") if where == "sqlite" else request.getfixturevalue("pg_url")
    refunds, key = tmp_path / "refunds.log", f"order-{uuid.uuid4().hex}"
    first = await _ask_in_a_new_process(journal, refunds, key)
    again = await _ask_in_a_new_process(journal, refunds, key)  # the client retries, the server was restarted
    assert not first.is_error and not again.is_error
    assert first.content[0].text == again.content[0].text == "Refund issued for INV-1."
    assert first.structured_content == again.structured_content
    assert refunds.read_text().splitlines() == ["refund INV-1"]  # the specialist's tool ran once
    other = await _ask_in_a_new_process(journal, refunds, key, "refund INV-2 too")
    assert other.is_error and "already used with other arguments" in other.content[0].text
    assert refunds.read_text().splitlines() == ["refund INV-1"]


@pytest.mark.anyio
async def test_without_a_journal_the_mcp_command_refuses_a_key_and_runs_nothing(tmp_path: Path) -> None:
    refunds = tmp_path / "refunds.log"
    from mcp import Client, StdioServerParameters

    env = {**ENV, "REFUND_LOG": str(refunds)}
    params = StdioServerParameters(
        command=sys.executable, args=[*CLI, "tests.mcp_servers.refund_desk:desk"], env=env, cwd=str(ROOT)
    )
    async with Client(params) as client:
        refused = await client.call_tool("ask", {"request": "refund INV-1"}, meta={"idempotency_key": "order-1"})
    assert refused.is_error and "does not journal runs; start the server with --journal" in refused.content[0].text  # type: ignore[union-attr]
    assert not refunds.exists()


def test_serve_and_mcp_attach_a_journal_with_one_function() -> None:
    """The two front ends share the code that gives served agents a JournalRuntime."""
    from jeeves_router.journal import JournalRuntime, MemoryJournal
    from jeeves_router.journal.attach import DEFAULT_HISTORY, journal_agents
    from jeeves_router.mcp import server as mcp_server
    from jeeves_router.runtime import Runtime
    from jeeves_router.serve import app as serve_app

    assert mcp_server.journal_agents is serve_app.journal_agents is journal_agents
    plain, store, own = load_agent("tests.mcp_servers.desk:make_unresolved_desk"), MemoryJournal(), MemoryJournal()
    kept = Agent("x", name="kept", model=ScriptedModel(["a"]), runtime=JournalRuntime(own))
    assert journal_agents({"strict": plain, "kept": kept}, store) == [store, own]
    assert isinstance(plain.runtime, JournalRuntime) and plain.runtime.journal is store
    assert plain.runtime.session_history is DEFAULT_HISTORY
    assert isinstance(kept.runtime, JournalRuntime) and kept.runtime.journal is own
    other = Agent("x", name="other", model=ScriptedModel(["a"]), runtime=Runtime())
    with pytest.raises(UsageError, match="agent 'other' already has the runtime"):
        journal_agents({"other": other}, store)


def test_cli_rejects_bad_targets() -> None:
    run = subprocess.run(
        [sys.executable, *CLI, "tests.mcp_servers.desk:nothing"],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": ""},
        cwd=ROOT,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert run.returncode == 2
    assert "cannot import it" in run.stderr and run.stdout == ""
    bad = subprocess.run(
        [sys.executable, *CLI, "tests.mcp_servers.desk:desk", "--transport", "sse"],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": ""},
        cwd=ROOT,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert bad.returncode == 2 and "--transport must be stdio or http" in bad.stderr


def test_load_agent_and_router_server_check_their_input() -> None:
    assert load_agent("tests.mcp_servers.desk:desk").name == "desk"
    assert load_agent("tests.mcp_servers.desk:make_unresolved_desk").name == "strict"
    with pytest.raises(UsageError, match="expected module:attribute"):
        load_agent("desk")
    with pytest.raises(UsageError, match="needs arguments"):
        load_agent("tests.mcp_servers.desk:_classify")
    with pytest.raises(UsageError, match="is a str, not an Agent"):
        load_agent("tests.mcp_servers.desk:__name__")
    with pytest.raises(UsageError, match="can only serve an Agent"):
        router_server("desk")  # type: ignore[arg-type]


def test_the_example_runs_offline() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    env.update(PYTHONPATH=str(ROOT), PYTHONWARNINGS="error")
    run = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "mcp_tools.py"), "I was charged twice for INV-7"],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
        stdin=subprocess.DEVNULL,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.splitlines() == [
        "  -> lookup_invoice({'invoice': 'INV-7'})",
        "  <- INV-7: 42.00 EUR, charged 2 times",
        "  -> refund({'invoice': 'INV-7', 'amount': 42.0})",
        "  <- refunded 42.00 EUR on INV-7",
        "[billing] Done: refunded 42.00 EUR on INV-7.",
        "[INV-8] Done: refunded 19.50 EUR on INV-8.",
        "[INV-9] I could not find that invoice.",
    ]


class _CrashAfterTheAsk(Wrapped):
    """A journal that fails once, when the result of the ``ask`` call is written: as if the process died."""

    def __init__(self, journal: Any) -> None:
        super().__init__(journal)
        self.crashed = False

    async def append(self, entries: Any) -> None:
        if not self.crashed and any(isinstance(e.record, StepRecord) and e.record.name == "tool:ask" for e in entries):
            self.crashed = True
            raise OSError("the process died before the ask's answer was journaled")
        await self.journal.append(entries)


def _caller(journal: Any, refunds: Path, desk_journal: Path) -> Agent:
    """A journaled agent whose one tool is the refund desk, served by ``jeeves-router mcp --journal``."""

    def model(request: ModelRequest) -> Reply:
        answers = [p.content for m in request.messages for p in m.parts if isinstance(p, ToolResultPart)]
        return (
            Reply(text=f"The desk says: {answers[0]}")
            if answers
            else Reply(calls=(Call("ask", {"request": "refund INV-1"}),))
        )

    args = [*CLI, "tests.mcp_servers.refund_desk:desk", "--journal", str(desk_journal)]
    desk = MCPServerStdio(sys.executable, args, env={**ENV, "REFUND_LOG": str(refunds)}, cwd=ROOT, name="desk")
    runtime = JournalRuntime(journal, on_unknown_tool_outcome="retry")
    return Agent(
        "You ask the desk.", name="caller", model=FunctionModel(model, name="caller"), tools=[desk], runtime=runtime
    )


@pytest.mark.anyio
async def test_a_resumed_agent_that_asks_a_journaled_desk_again_gets_the_first_answer_and_refunds_once(
    tmp_path: Path,
) -> None:
    # The caller's run made the ask (the desk refunded), then died before journaling the answer;
    # its resume re-sends the ask ("retry") with the same key in _meta: the desk replays its run.
    refunds, outer = tmp_path / "refunds.log", tmp_path / "caller.db"
    crashing = _CrashAfterTheAsk(SQLiteJournal(outer))
    with pytest.raises(OSError, match="process died"):
        await _caller(crashing, refunds, tmp_path / "desk.db").run("refund my invoice", session_id="c-1")
    assert refunds.read_text().splitlines() == ["refund INV-1"]
    result = await _caller(SQLiteJournal(outer), refunds, tmp_path / "desk.db").resume("c-1")
    assert (result.status, result.output) == ("ok", "The desk says: Refund issued for INV-1.")
    assert refunds.read_text().splitlines() == ["refund INV-1"]  # the desk's refund ran once


@pytest.mark.anyio
async def test_the_http_transport_refuses_a_body_over_max_request_bytes_before_reading_it() -> None:
    import httpx2

    args = (*CLI, "tests.mcp_servers.desk:desk", "--transport", "http", "--port", "{port}")
    async with http_process(*args, "--max-request-bytes", "4000") as (_, port):
        url = f"http://127.0.0.1:{port}/mcp"
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "ask"}}
        call["params"]["arguments"] = {"request": "x" * 5000}  # the whole body counts, as over jeeves-router serve
        headers = {"accept": "application/json, text/event-stream"}
        async with httpx2.AsyncClient() as http:
            over = await http.post(url, json=call, headers=headers)

            async def chunked() -> AsyncIterator[bytes]:  # no content-length: refused while reading
                yield b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": "'
                yield b"y" * 5000
                yield b'"}}'

            unsized = await http.post(url, content=chunked(), headers=headers)
        assert over.status_code == 413 and unsized.status_code == 413
        assert over.json()["error"]["message"] == "the request body is larger than the server's limit of 4000 bytes"
        assert over.json()["error"]["code"] == "request_too_large"
        statuses, answer = await _ask_over_http(url, {})  # a request within the limit is answered
    assert set(statuses) <= {200, 202} and not answer.is_error, (statuses, answer)
    assert answer.content[0].text == "Refund issued."


@pytest.mark.parametrize(("value", "shown"), [("0", "0"), ("-5", "-5")])
def test_max_request_bytes_is_checked_before_serving(value: str, shown: str) -> None:
    from typer.testing import CliRunner

    from jeeves_router.cli import app

    for command in (["mcp"], ["mcp", "--transport", "http"], ["serve"]):
        result = CliRunner().invoke(app, [*command, "tests.mcp_servers.desk:desk", "--max-request-bytes", value])
        assert result.exit_code == 2, result.output
        assert result.output == (
            f"error: --max-request-bytes must be a positive integer (a size in bytes; the default is 1048576, "
            f"1 MiB), got {shown}\n"
        )
    with pytest.raises(UsageError, match=r"^max_request_bytes must be a positive integer \(a size in bytes"):
        anyio.run(lambda: mcp_serve(Agent("x", name="x", model=FunctionModel(lambda r: "x")), max_request_bytes=0))


@pytest.mark.anyio
async def test_the_stdio_transport_holds_ask_to_max_request_bytes() -> None:
    from mcp import Client, StdioServerParameters

    args = [*CLI, "tests.mcp_servers.desk:desk", "--max-request-bytes", "20"]
    params = StdioServerParameters(command=sys.executable, args=args, env=ENV, cwd=str(ROOT))
    async with Client(params) as client:
        over = await client.call_tool("ask", {"request": "I was charged twice!!"})  # 21 bytes
        within = await client.call_tool("ask", {"request": "I was charged twice"})
    assert over.is_error
    assert over.content[0].text == "the request is larger than the server's limit of 20 bytes; nothing was run"  # type: ignore[union-attr]
    assert not within.is_error and within.content[0].text == "Refund issued."  # type: ignore[union-attr]
