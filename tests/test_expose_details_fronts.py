"""What the served replies and the MCP ``ask`` tool say of a tool's exception (see ``test_expose_details.py``).

Off (the default), a served run's events (``/v1/runs``), its chat completion (whole and
streamed) and the MCP result name a tool's exception by its type only. On, ``/v1/runs``
carries the run's events as they are, so the ``tool.result`` the model was shown quotes
the message; a failed run's error reply and a failed MCP ``ask`` still name its type only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest

from jeeves_router import Agent, Recovery, Router, RouterRoute
from jeeves_router.serve import create_app
from jeeves_router.testing import FunctionModel, RecordedSleeps
from tests.serve_apps import running
from tests.test_expose_details import SECRET, calls_lookup, classify, fails, fatal, lookup_tool, shows_secret

ASK = {"model": "desk", "messages": [{"role": "user", "content": "I was charged twice"}]}


def desk(*, expose: bool, billing: Any = calls_lookup, **recovery: Any) -> Agent:
    """A Router sending billing requests to a specialist whose ``lookup`` tool raises the secret."""
    specialist = Agent("Payments.", name="billing", model=FunctionModel(billing, name="billing"), tools=[lookup_tool()])
    general = Agent("The rest.", name="general", model=FunctionModel(lambda r: "general answer", name="general"))
    return Agent(
        "Desk",
        name="desk",
        model=FunctionModel(classify, name="classifier"),
        architecture=Router(
            routes=[RouterRoute("billing", specialist, "payments"), RouterRoute("general", general, "the rest")],
            recovery=Recovery(sleep=RecordedSleeps(), expose_details=expose, **recovery),
        ),
    )


def served(agent: Agent) -> dict[str, str]:
    """The bodies of ``/v1/runs``, a whole and a streamed chat completion of ``agent``."""
    with running(create_app(agent)) as server:
        runs = httpx.post(server.url + "/v1/runs", json={"model": "desk", "input": "I was charged twice"})
        whole = httpx.post(server.url + "/v1/chat/completions", json=ASK)
        streamed = httpx.post(server.url + "/v1/chat/completions", json={**ASK, "stream": True})
    return {"runs": runs.text, "whole": whole.text, "streamed": streamed.text}


def test_served_replies_name_a_tools_exception_by_its_type_only() -> None:
    bodies = served(desk(expose=False))
    assert '"lookup failed: RuntimeError"' in bodies["runs"]
    assert "Sorry, I could not look that up." in bodies["whole"]
    assert not any(shows_secret(body) for body in bodies.values())


def test_under_expose_details_the_run_events_show_the_message_and_a_failed_runs_error_does_not() -> None:
    bodies = served(desk(expose=True))
    assert f"lookup failed: RuntimeError: {SECRET}" in bodies["runs"]
    assert not shows_secret(bodies["whole"]) and not shows_secret(bodies["streamed"])  # the model's answer
    failing = served(desk(expose=True, billing=fails, classify_error=fatal))
    assert '"error_type":"RuntimeError"' in failing["runs"].replace(" ", "")
    assert "RuntimeError" in failing["whole"] and "RuntimeError" in failing["streamed"]
    assert not any(shows_secret(body) for body in failing.values())


def tool_results(body: str) -> list[str]:
    """The ``tool.result`` contents of a ``/v1/runs`` event stream."""
    events = [json.loads(line[6:]) for line in body.splitlines() if line.startswith("data: {")]
    return [ev["content"] for ev in events if ev.get("kind") == "tool.result"]


@pytest.mark.parametrize("expose", [False, True])
def test_a_keyed_retry_replays_what_the_first_run_showed_no_more_no_less(tmp_path: Path, expose: bool) -> None:
    """The retry of a completed keyed run is answered from the journal: the tool result as the first run showed it."""
    runs = {"model": "desk", "input": "I was charged twice"}
    with running(create_app(desk(expose=expose), journal=tmp_path / "journal.sqlite")) as server:
        first, retry = (
            httpx.post(server.url + "/v1/runs", json=runs, headers={"Idempotency-Key": "refund-INV-7"}) for _ in "12"
        )
    assert retry.headers.get("Idempotent-Replayed") == "true"
    shown = f"lookup failed: RuntimeError: {SECRET}" if expose else "lookup failed: RuntimeError"
    assert tool_results(first.text) == tool_results(retry.text) == [shown]


async def ask(agent: Agent) -> tuple[bool, str]:
    from mcp import Client

    from jeeves_router.mcp.server import router_server

    async with Client(router_server(agent)) as client:
        res = await client.call_tool("ask", {"request": "I was charged twice"})
    return res.is_error, repr(res.content) + repr(res.structured_content)


@pytest.mark.anyio
@pytest.mark.parametrize("expose", [False, True])
async def test_the_mcp_result_never_quotes_the_exception(expose: bool) -> None:
    pytest.importorskip("mcp")
    is_error, answered = await ask(desk(expose=expose))
    assert not is_error and "Sorry, I could not look that up." in answered
    assert not shows_secret(answered)
    failed, said = await ask(desk(expose=expose, billing=fails, classify_error=fatal))
    assert failed and "RuntimeError" in said and not shows_secret(said)


@pytest.mark.anyio
async def test_the_mcp_clients_own_tool_errors_quote_no_command_line_environment_or_url_credentials() -> None:
    """A ToolError's message is kept and shown whatever expose_details says: what the library writes there is safe."""
    pytest.importorskip("mcp")
    import socket
    import sys

    from jeeves_router import ToolError
    from jeeves_router.mcp import MCPServerHTTP, MCPServerStdio
    from jeeves_router.testing import ScriptedModel

    arg, env, cred = "arg-secret-1", "env-secret-2", "url-secret-3"
    with socket.socket() as closed:  # bound, not listening: a refused connection on 127.0.0.1
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        servers = [
            MCPServerStdio("/nonexistent/mcp-server", ["--token", arg], env={"API_KEY": env}),
            MCPServerStdio(sys.executable, ["-c", "import sys; sys.exit(3)", "--token", arg], env={"API_KEY": env}),
            MCPServerHTTP(f"http://user:{cred}@127.0.0.1:{port}/mcp?key={cred}", connect_timeout=30),
        ]
        for server in servers:
            with pytest.raises(ToolError, match="could not be started") as failed:
                await Agent("x", model=ScriptedModel(["unused"]), tools=[server]).run("go")
            said = str(failed.value)
            assert not any(secret in said for secret in (arg, env, cred)), said
