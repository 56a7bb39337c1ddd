"""The served router, driven by the real openai client and raw httpx over loopback."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx2 as httpx
import openai
import pytest

from jeeves_router.ids import SESSION_ID_RULE
from jeeves_router.journal import JournalRuntime, MemoryJournal, SQLiteJournal, session_turns
from jeeves_router.serve import create_app
from jeeves_router.testing import FunctionModel
from tests.serve_apps import ServerThread, build_desk, desk_with, running

TOKEN = "t0ken-5ecret-for-tests"


@pytest.fixture
def served() -> Iterator[ServerThread]:
    with running(create_app(build_desk(), journal=MemoryJournal())) as server:
        yield server


def client_for(server: ServerThread, key: str = "unused") -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url + "/v1", api_key=key, max_retries=0)


def test_openai_client_gets_the_specialists_answer_and_the_routing_decision(served: ServerThread) -> None:
    client = client_for(served)
    raw = client.chat.completions.with_raw_response.create(
        model="desk", messages=[{"role": "system", "content": "ignored"}, {"role": "user", "content": "refund me"}]
    )
    reply = raw.parse()
    assert reply.choices[0].message.content == "[billing] Happy to help (I see 0 earlier messages)."
    assert reply.choices[0].finish_reason == "stop"
    assert reply.model == "desk"
    assert reply.usage is not None and reply.usage.total_tokens > 0
    jeeves = (reply.model_extra or {})["jeeves"]
    assert jeeves["route"] == "billing" and jeeves["confidence"] == pytest.approx(0.92)
    assert jeeves["fallback_reason"] is None and jeeves["status"] == "ok"
    assert raw.headers["x-jeeves-route"] == "billing"
    assert raw.headers["x-jeeves-confidence"] == "0.9200"
    assert "x-jeeves-fallback-reason" not in raw.headers


def test_openai_client_streams_the_answer_with_the_decision_in_headers_and_last_chunk(served: ServerThread) -> None:
    client = client_for(served)
    with client.chat.completions.with_streaming_response.create(
        model="desk",
        messages=[{"role": "user", "content": "what is the weather"}],
        stream=True,
        stream_options={"include_usage": True},
    ) as raw:
        assert raw.headers["content-type"].startswith("text/event-stream")
        assert raw.headers["x-jeeves-route"] == "general"
        assert raw.headers["x-jeeves-fallback-reason"] == "low_confidence"
        chunks = list(raw.parse())
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "[general] Happy to help (I see 0 earlier messages)."
    finish = [c for c in chunks if c.choices and c.choices[0].finish_reason == "stop"]
    assert len(finish) == 1
    jeeves = (finish[0].model_extra or {})["jeeves"]
    assert jeeves["route"] == "general" and jeeves["used_fallback"] is True
    assert jeeves["fallback_reason"] == "low_confidence"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None


def test_models_lists_the_served_agents(served: ServerThread) -> None:
    assert [m.id for m in client_for(served).models.list()] == ["desk"]


def test_models_retrieve_answers_a_served_model_and_404_for_another(served: ServerThread) -> None:
    client = client_for(served)
    desk = client.models.retrieve("desk")
    assert desk.model_dump() == client.models.list().data[0].model_dump()
    assert (desk.id, desk.object, desk.owned_by) == ("desk", "model", "jeeves-router")
    with pytest.raises(openai.NotFoundError) as info:
        client.models.retrieve("nope")
    error = info.value.body
    assert isinstance(error, dict) and error["code"] == "model_not_found" and error["param"] == "model"
    assert "unknown model 'nope'" in error["message"] and error["type"] == "invalid_request_error"


def test_sessions_continue_through_the_server_and_from_python() -> None:
    journal = MemoryJournal()
    desk = build_desk()
    with running(create_app(desk, journal=journal)) as server:
        client = client_for(server)

        def ask(text: str) -> str:
            reply = client.chat.completions.create(
                model="desk", messages=[{"role": "user", "content": text}], extra_body={"session_id": "s-1"}
            )
            return reply.choices[0].message.content or ""

        assert ask("I was charged twice").endswith("(I see 0 earlier messages).")
        assert ask("and the refund?").endswith("(I see 2 earlier messages).")
        # a request that sends its own history uses it instead of the stored one
        explicit = client.chat.completions.create(
            model="desk",
            messages=[
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "hello"},
                {"role": "user", "content": "refund"},
            ],
            extra_body={"session_id": "s-2"},
        )
        assert (explicit.choices[0].message.content or "").endswith("(I see 2 earlier messages).")
        session = httpx.get(server.url + "/v1/sessions/s-1").json()
    assert session["id"] == "s-1"
    assert [(t["prompt"], t["route"], t["status"]) for t in session["turns"]] == [
        ("I was charged twice", "billing", "ok"),
        ("and the refund?", "billing", "ok"),
    ]
    # the same session from Python sees the two served turns
    assert isinstance(desk.runtime, JournalRuntime)
    result = anyio.run(lambda: desk.run("one more refund", session_id="s-1"))
    assert result.output is not None and result.output.endswith("(I see 4 earlier messages).")
    assert len(anyio.run(session_turns, journal, "s-1")) == 3


def test_runs_stream_typed_events_as_named_sse(served: ServerThread) -> None:
    with httpx.stream("POST", served.url + "/v1/runs", json={"model": "desk", "input": "API error 500"}) as r:
        assert r.status_code == 200
        body = r.read().decode()
    frames = [f for f in body.split("\n\n") if f.strip()]
    parsed = []
    for frame in frames:
        fields = dict(line.split(": ", 1) for line in frame.splitlines())
        data = json.loads(fields["data"])
        assert data["kind"] == fields["event"]
        parsed.append((int(fields["id"]), fields["event"], data))
    assert [p[0] for p in parsed] == list(range(1, len(parsed) + 1))
    kinds = [p[1] for p in parsed]
    assert kinds[0] == "run.started" and kinds[-1] == "run.completed"
    assert kinds.index("router.classified") < kinds.index("router.dispatched") < kinds.index("text.delta")
    assert parsed[-1][2]["result"]["route"] == "technical"
    assert "".join(p[2]["text"] for p in parsed if p[1] == "text.delta").startswith("[technical] ")


def test_runs_accept_force_route_and_refuse_an_unknown_one(served: ServerThread) -> None:
    ok = httpx.post(served.url + "/v1/runs", json={"model": "desk", "input": "hi", "force_route": "billing"})
    assert '"route":"billing"' in ok.text.replace(" ", "")
    bad = httpx.post(served.url + "/v1/runs", json={"model": "desk", "input": "hi", "force_route": "nope"})
    assert bad.status_code == 400 and "nope" in bad.json()["error"]["message"]
    assert bad.json()["error"]["param"] == "force_route"  # the field at fault, as every other 400 names it


def test_runs_refuse_force_route_for_an_agent_without_routes_naming_the_field() -> None:
    from jeeves_router import Agent

    plain = Agent("You answer.", name="plain", model=FunctionModel(lambda r: "an answer"))
    with running(create_app(plain)) as server:
        bad = httpx.post(server.url + "/v1/runs", json={"model": "plain", "input": "hi", "force_route": "billing"})
    assert bad.status_code == 400
    error = bad.json()["error"]
    assert error["param"] == "force_route" and error["message"].startswith("force_route is for routers")


def test_runs_refuse_a_context_off_the_routers_schema_naming_the_field() -> None:
    from pydantic import BaseModel

    from jeeves_router import Agent, Router, RouterRoute

    class Account(BaseModel):
        account_id: int

    billing = Agent("You handle billing.", name="billing", model=FunctionModel(lambda r: "billing answer"))
    desk = Agent(
        "desk",
        name="desk",
        model=FunctionModel(lambda r: "billing"),
        architecture=Router(routes=[RouterRoute("billing", billing, "payments")], context_schema=Account),
    )
    with running(create_app(desk)) as server:
        ask = {"model": "desk", "input": "refund me"}
        bad = httpx.post(server.url + "/v1/runs", json={**ask, "context": {"account_id": "not a number"}})
        assert bad.status_code == 400
        error = bad.json()["error"]
        assert error["param"] == "context" and error["message"].startswith("context does not match Account")
        assert httpx.post(server.url + "/v1/runs", json={**ask, "context": {"account_id": 7}}).status_code == 200


def test_runs_match_force_route_as_route_names_are_matched(served: ServerThread) -> None:
    # was a 400 "force_route 'Billing' is not a declared route"
    ok = httpx.post(served.url + "/v1/runs", json={"model": "desk", "input": "hi", "force_route": "Billing"})
    assert ok.status_code == 200
    parsed = [json.loads(line[len("data: ") :]) for line in ok.text.splitlines() if line.startswith("data: ")]
    dispatched = [e for e in parsed if e.get("kind") == "router.dispatched"]
    assert [(e["route"], e["forced"]) for e in dispatched] == [("billing", True)]
    assert parsed[-1]["kind"] == "run.completed" and parsed[-1]["result"]["route"] == "billing"
    bad = httpx.post(served.url + "/v1/runs", json={"model": "desk", "input": "hi", "force_route": "Bill"})
    assert bad.status_code == 400
    assert bad.json()["error"]["message"].startswith("force_route 'Bill' is not a declared route; pass one of")


def test_runs_refuse_stream_false_naming_the_field_and_stream_with_stream_true(served: ServerThread) -> None:
    ask = {"model": "desk", "input": "refund me"}
    whole = httpx.post(served.url + "/v1/runs", json={**ask, "stream": False})
    assert whole.status_code == 400 and whole.headers["content-type"] == "application/json"
    error = whole.json()["error"]
    assert error["param"] == "stream" and error["type"] == "invalid_request_error"
    assert error["message"].startswith("field 'stream' must be true or left out: /v1/runs always streams")
    assert "POST /v1/chat/completions" in error["message"]
    bad = httpx.post(served.url + "/v1/runs", json={**ask, "stream": "no"})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "stream"
    streamed = httpx.post(served.url + "/v1/runs", json={**ask, "stream": True})
    assert streamed.status_code == 200 and streamed.headers["content-type"].startswith("text/event-stream")
    assert "event: run.completed" in streamed.text


@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_an_empty_request_is_refused_as_the_mcp_ask_tool_refuses_it(served: ServerThread, text: str) -> None:
    from jeeves_router._limits import EMPTY_REQUEST

    run = httpx.post(served.url + "/v1/runs", json={"model": "desk", "input": text, "session_id": "empty-1"})
    assert run.status_code == 400 and run.headers["content-type"] == "application/json"
    assert run.json()["error"] == {
        "message": f"{EMPTY_REQUEST} (field 'input' has no text)",
        "type": "invalid_request_error",
        "param": "input",
        "code": "empty_request",
    }
    with pytest.raises(openai.BadRequestError) as refused:
        client_for(served).chat.completions.create(
            model="desk", messages=[{"role": "user", "content": text}], extra_body={"session_id": "empty-1"}
        )
    assert refused.value.body["message"] == f"{EMPTY_REQUEST} (the last user message has no text)"  # type: ignore[index]
    assert httpx.get(served.url + "/v1/sessions/empty-1").status_code == 404  # nothing ran


@pytest.mark.parametrize(
    ("body", "status", "needle", "param"),
    [
        (b"{not json", 400, "not valid JSON", None),
        (b"[1, 2]", 400, "must be a JSON object", None),
        (b'{"messages": [{"role": "user", "content": "x"}]}', 400, "missing required field 'model'", "model"),
        (b'{"model": "nope", "messages": [{"role": "user", "content": "x"}]}', 404, "unknown model 'nope'", "model"),
        (b'{"model": "desk"}', 400, "missing required field 'messages'", "messages"),
        (b'{"model": "desk", "messages": "hi"}', 400, "'messages' must be list", "messages"),
        (b'{"model": "desk", "messages": [{"role": "tool", "content": "x"}]}', 400, "messages[0].role", "messages[0]"),
        (b'{"model": "desk", "messages": [{"role": "assistant", "content": "x"}]}', 400, "role 'user'", "messages"),
        (b'{"model": "desk", "messages": [{"role": "user", "content": 3}]}', 400, "content must be", "messages[0]"),
        (b'{"model": "desk", "messages": [{"role": "user", "content": "x"}], "n": 2}', 400, "'n' must be 1", "n"),
        (b'{"model": "desk", "messages": [{"role": "user", "content": ""}]}', 400, "the request is empty", "messages"),
        (b'{"model": "desk", "messages": [{"role": "user", "content": " \\n"}]}', 400, "request is empty", "messages"),
        (b'{"model": "desk", "messages": [{"role": "user", "content": []}]}', 400, "request is empty", "messages"),
        (b'{"model": "desk", "messages": [{"role": "user", "content": "x"}], "stream": "yes"}', 400, "bool", "stream"),
        (
            b'{"model": "desk", "messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]}',
            400,
            "'tools' is not supported",
            "tools",
        ),
        (
            b'{"model": "desk", "messages": [{"role": "user", "content": "x"}], "session_id": "a b"}',
            400,
            "session_id must be",
            "session_id",
        ),
    ],
)
def test_bad_requests_get_openai_shaped_errors_naming_the_problem(
    served: ServerThread, body: bytes, status: int, needle: str, param: str | None
) -> None:
    r = httpx.post(served.url + "/v1/chat/completions", content=body, headers={"content-type": "application/json"})
    assert r.status_code == status
    error = r.json()["error"]
    assert needle in error["message"]
    assert error["param"] == param
    assert set(error) == {"message", "type", "param", "code"}


def test_openai_client_raises_its_own_error_types(served: ServerThread) -> None:
    with pytest.raises(openai.NotFoundError) as info:
        client_for(served).chat.completions.create(model="nope", messages=[{"role": "user", "content": "x"}])
    assert "unknown model 'nope'" in str(info.value)


def test_body_over_the_limit_is_refused() -> None:
    with running(create_app(build_desk(), max_request_bytes=200)) as server:
        big = {"model": "desk", "messages": [{"role": "user", "content": "x" * 500}]}
        r = httpx.post(server.url + "/v1/chat/completions", json=big)
        assert r.status_code == 413 and "200 bytes" in r.json()["error"]["message"]
        assert r.content == json.dumps(r.json(), separators=(",", ":")).encode()  # compact, as every other reply

        def chunked() -> Iterator[bytes]:  # no content-length: the limit applies while reading
            yield b'{"model": "desk", "messages": [{"role": "user", "content": "'
            yield b"y" * 500
            yield b'"}]}'

        r = httpx.post(server.url + "/v1/chat/completions", content=chunked())
        assert r.status_code == 413


def test_unknown_paths_methods_and_sessions_answer_in_the_error_shape(served: ServerThread) -> None:
    r = httpx.get(served.url + "/v2/nothing")
    assert r.status_code == 404 and "no endpoint /v2/nothing" in r.json()["error"]["message"]
    r = httpx.get(served.url + "/v1/chat/completions")
    assert r.status_code == 405 and "GET" in r.json()["error"]["message"]
    r = httpx.get(served.url + "/v1/sessions/never-seen")
    assert r.status_code == 404 and r.json()["error"]["code"] == "session_not_found"


@pytest.mark.parametrize("sid", ["%2e%2e", "x" * 300, "a%20b", "-x"])
def test_a_malformed_session_id_in_the_path_is_refused_naming_the_rule(served: ServerThread, sid: str) -> None:
    r = httpx.get(served.url + "/v1/sessions/" + sid)
    assert r.status_code == 400 and r.json()["error"]["param"] == "session_id"
    assert r.json()["error"]["message"] == f"malformed session id in the path: {SESSION_ID_RULE}"


def test_sessions_need_a_journal() -> None:
    with running(create_app(build_desk())) as server:
        r = httpx.get(server.url + "/v1/sessions/s-1")
        assert r.status_code == 404 and "journal" in r.json()["error"]["message"]


def test_a_failed_run_reports_its_type_without_its_message_or_a_traceback(caplog: pytest.LogCaptureFixture) -> None:
    secret = "sk-live-0123456789abcdef"

    def broken(request: object) -> str:
        raise RuntimeError(f"upstream said: bad key {secret}")

    caplog.set_level(logging.DEBUG)
    with running(create_app(desk_with(FunctionModel(broken)))) as server:
        messages = [{"role": "user", "content": "refund"}]
        whole = httpx.post(server.url + "/v1/chat/completions", json={"model": "desk", "messages": messages})
        streamed = httpx.post(
            server.url + "/v1/chat/completions", json={"model": "desk", "messages": messages, "stream": True}
        )
        events = httpx.post(server.url + "/v1/runs", json={"model": "desk", "input": "refund"})
    for r in (whole, streamed):
        assert r.status_code == 500
        assert r.json()["error"]["code"] == "run_failed" and "RuntimeError" in r.json()["error"]["message"]
    assert "event: run.failed" in events.text
    for text in (whole.text, streamed.text, events.text, caplog.text):
        assert secret not in text and "Traceback" not in text


def test_a_bearer_token_guards_every_endpoint(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with running(create_app(build_desk(), token=TOKEN)) as server:
        for headers in ({}, {"authorization": "Bearer wrong-token"}, {"authorization": f"Basic {TOKEN}"}):
            r = httpx.get(server.url + "/v1/models", headers=headers)
            assert r.status_code == 401
            assert r.json()["error"]["code"] == "invalid_api_key" and r.headers["www-authenticate"] == "Bearer"
            assert r.content == json.dumps(r.json(), separators=(",", ":")).encode()  # compact, as every other reply
        with pytest.raises(openai.AuthenticationError):
            client_for(server, "wrong").chat.completions.create(
                model="desk", messages=[{"role": "user", "content": "x"}]
            )
        reply = client_for(server, TOKEN).chat.completions.create(
            model="desk", messages=[{"role": "user", "content": "refund"}]
        )
        assert reply.choices[0].message.content
    assert TOKEN not in caplog.text


def test_an_unresolved_run_answers_null_content_with_its_status() -> None:
    from jeeves_router import Agent, Router, RouterRoute

    billing = Agent("b", name="billing", model=FunctionModel(lambda r: "paid"))
    desk = Agent(
        "desk",
        name="desk",
        model=FunctionModel(lambda r: "route: billing\nconfidence: 0.2"),
        architecture=Router(routes=[RouterRoute("billing", billing, "payments")], require_confidence_above=0.6),
    )
    with running(create_app(desk)) as server:
        client = client_for(server)
        raw = client.chat.completions.with_raw_response.create(
            model="desk", messages=[{"role": "user", "content": "hm"}]
        )
        whole = raw.parse()
        stream = list(
            client.chat.completions.create(model="desk", messages=[{"role": "user", "content": "hm"}], stream=True)
        )
    assert whole.choices[0].message.content is None
    assert (whole.model_extra or {})["jeeves"]["status"] == "unresolved"
    assert raw.headers["x-jeeves-fallback-reason"] == "low_confidence"
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices) == ""
    assert (stream[-1].model_extra or {})["jeeves"]["status"] == "unresolved"


@pytest.mark.anyio
async def test_a_server_stopped_by_an_error_still_closes_the_journal_it_opened(tmp_path: Path) -> None:
    import sqlite3

    desk = build_desk()
    app = create_app(desk, journal=tmp_path / "runs.db")  # the app opens this journal: it must close it
    assert isinstance(desk.runtime, JournalRuntime)
    store = desk.runtime.journal
    assert isinstance(store, SQLiteJournal)
    conn = await store._run(lambda c: c)  # opens the connection
    with pytest.raises(RuntimeError, match="server failed"):
        async with app.router.lifespan_context(app):  # type: ignore[attr-defined]
            raise RuntimeError("server failed")
    # an open connection would leak (Python 3.13 warns when one is collected unclosed)
    with pytest.raises(sqlite3.ProgrammingError, match="closed database"):
        conn.execute("SELECT 1")
