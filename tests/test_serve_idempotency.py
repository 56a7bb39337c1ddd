"""Retry safety: the ``Idempotency-Key`` header of the served router (and ``_meta`` of the MCP ``ask`` tool).

A desk whose billing specialist calls a ``refund`` tool once per run, then answers; every
test counts the refunds the tool made.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
import openai
import pytest

from examples.serve_desk import classify
from jeeves_router import Agent, Router, RouterRoute
from jeeves_router.ids import keyed_run_id, keyed_session_id
from jeeves_router.journal import JournalRuntime, MemoryJournal, PostgresJournal, SQLiteJournal, session_turns
from jeeves_router.messages import ToolResultPart
from jeeves_router.models.base import ModelRequest
from jeeves_router.serve import create_app
from jeeves_router.testing import Call, FunctionModel, Reply
from jeeves_router.tools import tool
from tests.serve_apps import running

CHAT = "/v1/chat/completions"
RUNS = "/v1/runs"
ANSWER = "Refund issued for INV-1."


class Desk:
    """A routed desk: ``refund`` requests go to a billing specialist that refunds, then answers.

    Args:
        tool_gate: The refund waits for it (``started`` is set when the refund began).
        answer_gate: The specialist's answer after the refund waits for it.
        fail_answers: The first this many answers after the refund raise ``ConnectionError``.
    """

    def __init__(
        self,
        refunds: list[str] | None = None,
        *,
        tool_gate: threading.Event | None = None,
        answer_gate: threading.Event | None = None,
        fail_answers: int = 0,
        instructions: str = "You refund.",
    ) -> None:
        self.refunds = refunds if refunds is not None else []
        self.started = threading.Event()
        self.fail_answers = fail_answers

        @tool
        async def refund(invoice: str) -> str:
            """Refund an invoice."""
            self.started.set()
            while tool_gate is not None and not tool_gate.is_set():  # noqa: ASYNC110 - set from the test's thread
                await anyio.sleep(0.01)
            self.refunds.append(invoice)
            return f"refunded {invoice}"

        async def specialist(request: ModelRequest) -> Reply:
            if not any(isinstance(p, ToolResultPart) for m in request.messages for p in m.parts):
                return Reply(calls=(Call("refund", {"invoice": "INV-1"}),))
            while answer_gate is not None and not answer_gate.is_set():  # noqa: ASYNC110 - as above
                await anyio.sleep(0.01)
            if self.fail_answers:
                self.fail_answers -= 1
                raise ConnectionError("the model's connection dropped")
            return Reply(text=ANSWER)

        self.model = FunctionModel(specialist, name="billing")
        billing = Agent(instructions, name="billing", model=self.model, tools=[refund])
        general = Agent("You handle the rest.", name="general", model=FunctionModel(lambda r: "general answer"))
        self.agent = Agent(
            "desk",
            name="desk",
            model=FunctionModel(classify, name="classifier"),
            architecture=Router(
                routes=[RouterRoute("billing", billing, "payments"), RouterRoute("general", general, "the rest")],
                fallback_route="general",
                require_confidence_above=0.6,
            ),
        )


def chat(text: str = "refund me please", **extra: Any) -> dict[str, Any]:
    return {"model": "desk", "messages": [{"role": "user", "content": text}], **extra}


def keyed(key: str) -> dict[str, str]:
    return {"Idempotency-Key": key}


def client_for(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)


def streamed(client: openai.OpenAI, key: str) -> tuple[str, dict[str, Any]]:
    """A streamed completion's text and the ``jeeves`` object of its last chunk."""
    text, jeeves = "", {}
    for part in client.chat.completions.create(**chat(), stream=True, extra_headers=keyed(key)):  # type: ignore[call-overload]
        if part.choices and part.choices[0].delta.content:
            text += part.choices[0].delta.content
        jeeves = (part.model_extra or {}).get("jeeves") or jeeves
    return text, jeeves


def events(response: httpx.Response) -> Iterator[tuple[str, dict[str, Any]]]:
    """The named events of a ``/v1/runs`` stream."""
    kind = ""
    for line in response.iter_lines():
        if line.startswith("event: "):
            kind = line[7:]
        elif line.startswith("data: "):
            yield kind, json.loads(line[6:])


def retry_past_409(send: Any, tries: int = 500) -> httpx.Response:
    """Send until the answer is not 409 (the first run of the key is still being cancelled)."""
    for _ in range(tries):
        reply: httpx.Response = send()
        if reply.status_code != 409:
            return reply
        time.sleep(0.01)
    raise AssertionError("still 409")


def test_a_retried_refund_runs_the_tool_once_and_answers_as_the_first_time() -> None:
    desk = Desk()
    with running(create_app(desk.agent, journal=MemoryJournal())) as server:
        client = client_for(server.url)
        first = client.chat.completions.with_raw_response.create(**chat(), extra_headers=keyed("order-1"))
        calls = len(desk.model.requests)
        again = client.chat.completions.with_raw_response.create(**chat(), extra_headers=keyed("order-1"))
        text, jeeves = streamed(client, "order-1")  # the same request, retried as a stream
    a, b = first.parse(), again.parse()
    assert desk.refunds == ["INV-1"]
    assert len(desk.model.requests) == calls  # no model call either: replayed from the journal
    assert a.choices[0].message.content == b.choices[0].message.content == text == ANSWER
    decision = (a.model_extra or {})["jeeves"]
    assert decision["route"] == "billing" and decision["status"] == "ok"
    assert (b.model_extra or {})["jeeves"] == jeeves == decision
    assert again.headers["x-jeeves-route"] == "billing"
    assert again.headers["x-jeeves-session-id"] == first.headers["x-jeeves-session-id"] == decision["session_id"]


def test_a_reply_from_a_completed_run_says_idempotent_replayed_and_a_first_run_does_not() -> None:
    desk = Desk()
    with running(create_app(desk.agent, journal=MemoryJournal())) as server:
        url, run = server.url, {"model": "desk", "input": "refund me please"}

        def post(path: str, body: dict[str, Any], key: str) -> httpx.Response:
            return httpx.post(url + path, json=body, headers=keyed(key))

        replies = {
            "chat": [post(CHAT, chat(), "order-20"), post(CHAT, chat(), "order-20")],
            "chat stream": [post(CHAT, chat(stream=True), "order-21"), post(CHAT, chat(stream=True), "order-21")],
            "runs": [post(RUNS, run, "order-22"), post(RUNS, run, "order-22")],
        }
        unkeyed = httpx.post(url + CHAT, json=chat())
        across = post(CHAT, chat(stream=True), "order-20")  # a whole reply retried as a stream
    for what, (first, again) in replies.items():
        assert first.status_code == again.status_code == 200, what
        assert "idempotent-replayed" not in first.headers, what
        assert again.headers["idempotent-replayed"] == "true", what
    assert across.headers["idempotent-replayed"] == "true" and "idempotent-replayed" not in unkeyed.headers
    assert [kind for kind, _ in events(replies["runs"][1])][-1] == "run.completed"
    assert desk.refunds == ["INV-1"] * 4  # three keys once each, and the request without a key


def test_a_retry_that_resumes_a_failed_run_is_not_marked_replayed() -> None:
    desk = Desk(fail_answers=1)
    with running(create_app(desk.agent, journal=MemoryJournal())) as server:
        failed = httpx.post(server.url + CHAT, json=chat(), headers=keyed("order-23"))
        resumed = httpx.post(server.url + CHAT, json=chat(), headers=keyed("order-23"))  # runs the rest live
        replayed = httpx.post(server.url + CHAT, json=chat(), headers=keyed("order-23"))
    assert failed.status_code == 500 and resumed.status_code == replayed.status_code == 200
    assert "idempotent-replayed" not in failed.headers and "idempotent-replayed" not in resumed.headers
    assert replayed.headers["idempotent-replayed"] == "true"
    assert desk.refunds == ["INV-1"]


def test_a_retry_after_the_client_went_away_finishes_the_run_without_refunding_again() -> None:
    gate = threading.Event()
    desk = Desk(answer_gate=gate)
    journal = MemoryJournal()
    with running(create_app(desk.agent, journal=journal)) as server:
        body = {"model": "desk", "input": "refund me please"}
        with httpx.stream("POST", server.url + RUNS, json=body, headers=keyed("order-2")) as cut:
            assert cut.status_code == 200
            for kind, _ in events(cut):
                if kind == "tool.result":
                    break  # the client times out: it goes away after the refund, before the answer
        assert desk.refunds == ["INV-1"]
        gate.set()

        def retry() -> httpx.Response:
            return httpx.post(server.url + RUNS, json=body, headers=keyed("order-2"))

        replayed = retry_past_409(retry)
        sid = replayed.headers["x-jeeves-session-id"]
    assert replayed.status_code == 200
    kinds = [kind for kind, _ in events(replayed)]
    assert kinds.count("tool.result") == 1 and kinds[-1] == "run.completed"
    done = [data for kind, data in events(replayed) if kind == "run.completed"][-1]
    assert done["result"]["output"] == ANSWER
    assert desk.refunds == ["INV-1"]  # the journaled refund was served, not run again
    turns = anyio.run(session_turns, journal, sid)
    assert [(t.run_id, t.status, t.output) for t in turns] == [(keyed_run_id(sid, "order-2"), "ok", ANSWER)]


def test_a_client_that_times_out_during_the_refund_gets_its_answer_on_retry() -> None:
    # The README's case: the request timed out while the refund ran. The keyed run is not cut
    # (a cut refund's outcome is unknown, so every retry would fail): it finishes unseen.
    gate = threading.Event()
    desk = Desk(tool_gate=gate)
    with running(create_app(desk.agent, journal=MemoryJournal())) as server:
        body = {"model": "desk", "input": "refund me please"}
        with httpx.stream("POST", server.url + RUNS, json=body, headers=keyed("order-13")) as cut:
            for kind, _ in events(cut):
                if kind == "tool.called":
                    assert desk.started.wait(30)
                    break  # the client gives up while the refund runs
        gate.set()
        retried = retry_past_409(lambda: httpx.post(server.url + CHAT, json=chat(), headers=keyed("order-13")))
    assert retried.status_code == 200 and retried.json()["choices"][0]["message"]["content"] == ANSWER
    assert desk.refunds == ["INV-1"]


def test_a_retry_of_a_failed_run_resumes_it_from_its_journaled_refund() -> None:
    desk = Desk(fail_answers=1)
    with running(create_app(desk.agent, journal=MemoryJournal())) as server:
        failed = httpx.post(server.url + CHAT, json=chat(), headers=keyed("order-3"))
        retried = httpx.post(server.url + CHAT, json=chat(), headers=keyed("order-3"))
    assert failed.status_code == 500 and failed.json()["error"]["code"] == "run_failed"
    assert retried.status_code == 200 and retried.json()["choices"][0]["message"]["content"] == ANSWER
    assert desk.refunds == ["INV-1"]


def test_the_same_key_with_another_request_is_refused_with_422() -> None:
    desk = Desk()
    with running(create_app(desk.agent, journal=MemoryJournal())) as server:
        assert httpx.post(server.url + CHAT, json=chat(), headers=keyed("order-4")).status_code == 200
        other = httpx.post(server.url + CHAT, json=chat("refund me twice"), headers=keyed("order-4"))
        other_run = httpx.post(server.url + RUNS, json={"model": "desk", "input": "x"}, headers=keyed("order-4"))
    assert other.status_code == other_run.status_code == 422
    error = other.json()["error"]
    assert error["param"] == "Idempotency-Key" and error["code"] == "idempotency_key_conflict"
    assert "another request" in error["message"]
    assert desk.refunds == ["INV-1"]


def test_a_duplicate_while_the_first_is_in_flight_gets_409_with_retry_after() -> None:
    gate = threading.Event()
    desk = Desk(tool_gate=gate)
    with running(create_app(desk.agent, journal=MemoryJournal(), retry_after_s=2)) as server:
        first: dict[str, httpx.Response] = {}
        thread = threading.Thread(
            target=lambda: first.update(r=httpx.post(server.url + CHAT, json=chat(), headers=keyed("order-5")))
        )
        thread.start()
        try:
            assert desk.started.wait(30)
            busy = httpx.post(server.url + CHAT, json=chat(), headers=keyed("order-5"))
            busy_stream = httpx.post(server.url + CHAT, json=chat(stream=True), headers=keyed("order-5"))
        finally:
            gate.set()
            thread.join(30)
        after = httpx.post(server.url + CHAT, json=chat(), headers=keyed("order-5"))
    assert busy.status_code == busy_stream.status_code == 409
    assert busy.headers["retry-after"] == "2"
    assert busy.json()["error"]["code"] == "idempotency_key_in_flight"
    assert first["r"].status_code == after.status_code == 200
    assert after.json()["choices"][0]["message"]["content"] == ANSWER
    assert desk.refunds == ["INV-1"]


def test_refused_keys_are_logged_at_info_with_the_run_they_name_and_nothing_of_the_request(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="jeeves_router.serve")
    token, gate = "s3cret-bearer-of-the-test", threading.Event()
    desk = Desk(tool_gate=gate)
    auth = {"Authorization": f"Bearer {token}"}
    with running(create_app(desk.agent, journal=MemoryJournal(), token=token)) as server:

        def post(text: str) -> httpx.Response:
            return httpx.post(server.url + CHAT, json=chat(text), headers={**auth, **keyed("order-30")})

        first: dict[str, httpx.Response] = {}
        thread = threading.Thread(target=lambda: first.update(r=post("refund me please")))
        thread.start()
        try:
            assert desk.started.wait(30)
            busy = post("refund me please")
        finally:
            gate.set()
            thread.join(30)
        conflict = post("refund me twice, card 4242")
        replayed = post("refund me please")
    assert (busy.status_code, conflict.status_code, replayed.status_code, first["r"].status_code) == (
        409,
        422,
        200,
        200,
    )
    refused = [r for r in caplog.records if r.getMessage().startswith("idempotency key refused")]
    sid = keyed_session_id("order-30")
    assert [(r.name, r.levelno, r.fields) for r in refused] == [  # type: ignore[attr-defined]
        (
            "jeeves_router.serve",
            logging.INFO,
            {"reason": r, "status": c, "session_id": sid, "run_id": keyed_run_id(sid, "order-30")},
        )
        for r, c in (("in_flight", 409), ("conflict", 422))
    ]
    assert sid in refused[0].getMessage() and keyed_run_id(sid, "order-30") in refused[1].getMessage()
    for secret in (token, "card 4242", "refund me", "order-30"):
        assert secret not in caplog.text
    assert desk.refunds == ["INV-1"]


def test_requests_without_a_key_never_match_a_run_and_two_keys_are_two_runs() -> None:
    desk = Desk()
    journal = MemoryJournal()
    with running(create_app(desk.agent, journal=journal)) as server:

        def post(key: str | None) -> httpx.Response:
            return httpx.post(server.url + CHAT, json=chat(session_id="s-1"), headers=keyed(key) if key else None)

        replies = [post("a"), post("a"), post(None), post(None), post("b"), post("b")]
    assert [r.status_code for r in replies] == [200] * 6
    assert desk.refunds == ["INV-1"] * 4  # key a, two without a key, key b
    turns = anyio.run(session_turns, journal, "s-1")
    assert len(turns) == len({t.run_id for t in turns}) == 4
    assert [t.run_id for t in turns if t.run_id.startswith("k-")] == [keyed_run_id("s-1", k) for k in "ab"]


@pytest.mark.parametrize(
    ("key", "journal", "code"),
    [
        (b"k" * 256, True, "invalid_idempotency_key"),
        ("caf\u00e9".encode(), True, "invalid_idempotency_key"),
        (b"tab\tkey", True, "invalid_idempotency_key"),
        (b"order-6", False, "idempotency_key_needs_journal"),
    ],
)
def test_a_malformed_key_or_a_key_without_a_journal_is_refused_with_400(key: bytes, journal: bool, code: str) -> None:
    from starlette.testclient import TestClient

    desk = Desk()
    app = create_app(desk.agent, journal=MemoryJournal() if journal else None)
    with TestClient(app) as client:
        reply = client.post(CHAT, json=chat(), headers={"Idempotency-Key": key})
    assert reply.status_code == 400
    error = reply.json()["error"]
    assert error["param"] == "Idempotency-Key" and error["code"] == code and "Idempotency-Key" in error["message"]
    assert desk.refunds == []


def _two_servers(make_journal: Any) -> None:
    """Two apps (two processes' worth: own desks, runtimes and journal handles) on one journal."""
    refunds: list[str] = []
    gate = threading.Event()
    one, two = Desk(refunds, tool_gate=gate), Desk(refunds)
    with (
        running(create_app(one.agent, journal=make_journal())) as a,
        running(create_app(two.agent, journal=make_journal())) as b,
    ):
        worker: dict[str, httpx.Response] = {}
        thread = threading.Thread(
            target=lambda: worker.update(r=httpx.post(a.url + CHAT, json=chat(), headers=keyed("order-7")))
        )
        thread.start()
        try:
            assert one.started.wait(30)
            busy = httpx.post(b.url + CHAT, json=chat(), headers=keyed("order-7"))  # in flight on a
        finally:
            gate.set()
            thread.join(30)
        replayed = httpx.post(b.url + CHAT, json=chat(), headers=keyed("order-7"))
        conflict = httpx.post(b.url + CHAT, json=chat("refund me twice"), headers=keyed("order-7"))
        fresh = httpx.post(b.url + CHAT, json=chat(), headers=keyed("order-8"))
    assert busy.status_code == 409
    assert worker["r"].status_code == replayed.status_code == fresh.status_code == 200
    assert replayed.json()["choices"][0]["message"]["content"] == ANSWER
    assert replayed.json()["jeeves"] == worker["r"].json()["jeeves"]
    assert conflict.status_code == 422
    assert refunds == ["INV-1", "INV-1"]  # order-7 once (on a), order-8 once


def test_two_servers_on_one_sqlite_file_share_the_runs_of_their_keys(tmp_path: Path) -> None:
    _two_servers(lambda: SQLiteJournal(tmp_path / "runs.db"))


@pytest.mark.postgres
def test_two_servers_on_one_postgresql_journal_share_the_runs_of_their_keys(pg_url: str) -> None:
    table = f"jeeves_test_{uuid.uuid4().hex[:12]}"
    try:
        _two_servers(lambda: PostgresJournal(pg_url, table=table))
    finally:

        async def drop() -> None:
            async with PostgresJournal(pg_url, table=table) as j:
                await j._query(f"DROP TABLE IF EXISTS {table}", [])

        anyio.run(drop)


def test_a_run_of_another_process_is_resumed_once_it_has_been_quiet_for_in_flight_s(tmp_path: Path) -> None:
    refunds: list[str] = []
    gate = threading.Event()
    one, two = Desk(refunds, answer_gate=gate), Desk(refunds)
    path = tmp_path / "runs.db"
    with (
        running(create_app(one.agent, journal=SQLiteJournal(path))) as a,
        running(create_app(two.agent, journal=SQLiteJournal(path))) as b,
    ):
        body = {"model": "desk", "input": "refund me please"}
        with httpx.stream("POST", a.url + RUNS, json=body, headers=keyed("order-9")) as left:
            for kind, _ in events(left):
                if kind == "tool.result":
                    break  # the client went away; a's run waits for its answer (a hung model, a dead process)
        try:
            # b cannot tell a's attempt from one still running until it has been quiet for in_flight_s
            assert httpx.post(b.url + RUNS, json=body, headers=keyed("order-9")).status_code == 409
            runtime = two.agent.runtime
            assert isinstance(runtime, JournalRuntime)
            runtime.in_flight_s = 0.0  # as if that long had passed
            resumed = retry_past_409(lambda: httpx.post(b.url + RUNS, json=body, headers=keyed("order-9")))
        finally:
            gate.set()  # a's run ends too
    done = [data for kind, data in events(resumed) if kind == "run.completed"]
    assert resumed.status_code == 200 and done[-1]["result"]["output"] == ANSWER
    assert refunds == ["INV-1"]  # b served the refund a recorded


# -- MCP ---------------------------------------------------------------------------------------


async def _ask(desk: Agent, *calls: tuple[str, dict[str, Any] | None]) -> list[Any]:
    from mcp import Client

    from jeeves_router.mcp.server import router_server

    async with Client(router_server(desk)) as client:
        return [await client.call_tool("ask", {"request": text}, meta=meta) for text, meta in calls]


@pytest.mark.anyio
async def test_the_mcp_ask_tool_honours_an_idempotency_key_in_its_meta() -> None:
    pytest.importorskip("mcp")
    desk = Desk()
    desk.agent.runtime = JournalRuntime(MemoryJournal())
    key = {"idempotency_key": "order-10"}
    first, again, other, unkeyed = await _ask(
        desk.agent,
        ("refund me please", key),
        ("refund me please", key),
        ("refund me twice", key),
        ("refund me please", None),
    )
    assert not first.is_error and not again.is_error
    assert first.content[0].text == again.content[0].text == ANSWER
    assert first.structured_content == again.structured_content
    assert other.is_error and "already used" in other.content[0].text
    assert not unkeyed.is_error
    assert desk.refunds == ["INV-1", "INV-1"]  # order-10 once, the request without a key once


@pytest.mark.anyio
async def test_the_mcp_ask_tool_answers_a_call_whose_run_is_in_flight_with_an_error_saying_so() -> None:
    pytest.importorskip("mcp")
    from mcp import Client

    from jeeves_router.mcp.server import router_server

    gate = threading.Event()
    desk = Desk(tool_gate=gate)
    desk.agent.runtime = JournalRuntime(MemoryJournal())
    key = {"idempotency_key": "order-12"}
    first: list[Any] = []
    async with Client(router_server(desk.agent)) as client, anyio.create_task_group() as tg:

        async def ask() -> None:
            first.append(await client.call_tool("ask", {"request": "refund me please"}, meta=key))

        tg.start_soon(ask)
        with anyio.fail_after(30):  # a hang guard
            while not desk.started.is_set():  # noqa: ASYNC110 - set by the tool, in this loop
                await anyio.sleep(0.01)
        busy = await client.call_tool("ask", {"request": "refund me please"}, meta=key)
        gate.set()
    assert busy.is_error and "still in flight" in busy.content[0].text
    assert not first[0].is_error and first[0].content[0].text == ANSWER
    assert desk.refunds == ["INV-1"]


@pytest.mark.anyio
async def test_an_mcp_client_that_gives_up_during_the_refund_gets_its_answer_on_retry() -> None:
    # As over HTTP: the client cancels its ask (a timeout) while the refund runs; the keyed run
    # is not cut with it (the refund's outcome would be unknown, every retry would fail).
    pytest.importorskip("mcp")
    from mcp import Client

    from jeeves_router.mcp.server import router_server

    gate = threading.Event()
    desk = Desk(tool_gate=gate)
    desk.agent.runtime = JournalRuntime(MemoryJournal())
    key = {"idempotency_key": "order-14"}
    async with Client(router_server(desk.agent)) as client:
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: client.call_tool("ask", {"request": "refund me please"}, meta=key))
            with anyio.fail_after(30):  # a hang guard
                while not desk.started.is_set():  # noqa: ASYNC110 - set by the tool, in this loop
                    await anyio.sleep(0.01)
            tg.cancel_scope.cancel()  # the client gives up
        gate.set()
        for _ in range(500):
            again = await client.call_tool("ask", {"request": "refund me please"}, meta=key)
            if not (again.is_error and "in flight" in again.content[0].text):
                break
            await anyio.sleep(0.01)
    assert not again.is_error and again.content[0].text == ANSWER
    assert desk.refunds == ["INV-1"]


@pytest.mark.anyio
async def test_the_ask_tool_called_outside_a_request_runs_without_a_key() -> None:
    pytest.importorskip("mcp")
    from jeeves_router.mcp.server import router_server

    desk = Desk()
    result = await router_server(desk.agent).call_tool("ask", {"request": "refund me please"})  # no request: no _meta
    assert not result.is_error and result.content[0].text == ANSWER
    assert desk.refunds == ["INV-1"]


@pytest.mark.anyio
async def test_the_mcp_ask_tool_refuses_a_key_it_cannot_honour() -> None:
    pytest.importorskip("mcp")
    journaled = Desk()
    journaled.agent.runtime = JournalRuntime(MemoryJournal())
    (bad,) = await _ask(journaled.agent, ("refund me please", {"idempotency_key": ""}))
    plain = Desk()
    (unjournaled,) = await _ask(plain.agent, ("refund me please", {"idempotency_key": "order-11"}))
    assert bad.is_error and "printable ASCII" in bad.content[0].text
    assert unjournaled.is_error and "start the server with --journal" in unjournaled.content[0].text
    assert journaled.refunds == plain.refunds == []


def test_keyed_ids_name_one_run_per_key_and_session() -> None:
    ids = {keyed_run_id(s, k) for s in ("s-1", "s-2") for k in ("a", "b", "a b")}
    assert len(ids) == 6 and all(i.startswith("k-") for i in ids)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_retry_the_changed_agent_cannot_replay_is_refused_422_and_logged(
    stream: bool, caplog: pytest.LogCaptureFixture
) -> None:
    # A deploy between a request and its retry changed the specialist's instructions: the
    # completed run cannot be replayed step by step, and running it again could refund twice.
    journal, refunds = MemoryJournal(), []
    with running(create_app(Desk(refunds).agent, journal=journal)) as server:
        first = httpx.post(server.url + CHAT, json=chat(stream=stream), headers=keyed("order-30"))
    changed = Desk(refunds, instructions="You refund, politely.")
    with caplog.at_level(logging.INFO, logger="jeeves_router.serve"):
        with running(create_app(changed.agent, journal=journal)) as server:
            again = httpx.post(server.url + CHAT, json=chat(stream=stream), headers=keyed("order-30"))
    assert first.status_code == 200 and refunds == ["INV-1"] and changed.model.requests == []
    assert again.status_code == 422, again.text
    error = again.json()["error"]
    assert error["code"] == "idempotency_key_replay_diverged" and error["param"] == "Idempotency-Key"
    assert "use a new key" in error["message"]
    (logged,) = [r.getMessage() for r in caplog.records if "replay_diverged" in r.getMessage()]
    session = keyed_session_id("order-30")  # the request's session, not the specialist's child session
    assert f"session_id='{session}'" in logged and f"run_id='{keyed_run_id(session, 'order-30')}'" in logged
