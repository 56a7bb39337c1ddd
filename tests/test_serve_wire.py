"""The wire format without a server: validation, chunk encoding, loopback detection."""

from __future__ import annotations

import json

import pytest

from jeeves_router.messages import assistant, user
from jeeves_router.serve import ApiError, is_loopback
from jeeves_router.serve.wire import chunk, content_chunks, parse_chat, parse_run, sse_data


@pytest.mark.parametrize("text", ["", "plain", 'quo"te\\', "naïve ☃ \n\t\u2028", "\x00nul"])
def test_the_fast_content_encoder_matches_the_plain_one(text: str) -> None:
    fast = content_chunks("chatcmpl-1", "desk", 7)(text)
    assert fast == sse_data(chunk("chatcmpl-1", "desk", 7, delta={"content": text}))
    assert json.loads(fast[6:])["choices"][0]["delta"]["content"] == text


def test_chat_history_content_parts_and_ignored_roles() -> None:
    req = parse_chat(
        {
            "model": "desk",
            "messages": [
                {"role": "system", "content": "be nice"},
                {"role": "user", "content": [{"type": "text", "text": "he"}, {"type": "text", "text": "llo"}]},
                {"role": "assistant", "content": "hi"},
                {"role": "user", "content": "refund"},
            ],
            "temperature": 0.3,
            "tool_choice": "auto",
        },
        session_header="s-1",
    )
    assert req.prompt == "refund" and req.history == (user("hello"), assistant("hi"))
    assert req.session_id == "s-1" and not req.stream


def test_body_session_id_wins_over_the_header_and_image_parts_are_refused() -> None:
    msg = [{"role": "user", "content": "x"}]
    assert parse_chat({"model": "d", "messages": msg, "session_id": "a"}, session_header="b").session_id == "a"
    with pytest.raises(ApiError, match=r"messages\[0\]\.content\[0\] must be a text part"):
        parse_chat({"model": "d", "messages": [{"role": "user", "content": [{"type": "image_url"}]}]})


def test_run_requests_validate_their_fields() -> None:
    history = [{"role": "user", "content": "a"}]
    req = parse_run({"model": "desk", "input": "hi", "history": history, "context": {"k": 1}})
    assert req.history == (user("a"),) and req.context == {"k": 1}
    for body, needle in (
        ({"model": "desk"}, "missing required field 'input'"),
        ({"model": "desk", "input": 3}, "field 'input' must be str"),
        ({"model": "desk", "input": "x", "context": []}, "field 'context' must be dict"),
        ({"model": "desk", "input": "x", "force_route": True}, "field 'force_route' must be str"),
    ):
        with pytest.raises(ApiError, match=needle):
            parse_run(body)


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.8.0.1", True), ("::1", True), ("[::1]", True), ("localhost", True),
     ("0.0.0.0", False), ("::", False), ("192.168.1.4", False), ("example.com", False)],
)  # fmt: skip
def test_loopback_detection(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_deeply_nested_json_is_a_client_error() -> None:
    from jeeves_router.serve.wire import parse_json

    with pytest.raises(ApiError, match="nested too deeply") as info:
        parse_json(b"[" * 100_000 + b"]" * 100_000)
    assert info.value.status == 400
