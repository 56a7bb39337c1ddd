"""The wire format without a server: validation, chunk encoding, loopback detection."""

from __future__ import annotations

import json

import pytest

from jeeves_router.messages import assistant, user
from jeeves_router.serve import ApiError, is_loopback
from jeeves_router.serve.wire import chunk, content_chunks, parse_chat, parse_json, parse_run, sse_data


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


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b'{"model": "caf\xe9"}', "not UTF-8 text (byte 0xe9 at offset 14, line 1 column 15)"),  # Latin-1
        (
            b'{\n "model": "\xed\xa0\x80"}',
            "not UTF-8 text (byte 0xed at offset 13, line 2 column 12)",
        ),  # a raw surrogate
        (b"\xe9", "not UTF-8 text (byte 0xe9 at offset 0, line 1 column 1)"),
        (b"\xff\xfe{", "not UTF-16 text (byte 0x7b at offset 2)"),  # a UTF-16 byte order mark, then one byte
        (b"\xe9\x00\x00\x00", "not valid JSON at line 1 column 1 (read as UTF-32-LE, as its zero bytes suggest)"),
    ],
)
def test_a_body_that_is_not_utf8_text_is_refused_saying_so_and_where(body: bytes, says: str) -> None:
    with pytest.raises(ApiError) as info:
        parse_json(body)
    assert info.value.status == 400
    assert info.value.body()["error"]["message"] == f"the request body is {says}" + (
        ": send the JSON encoded as UTF-8" if "text" in says else ""
    )


def test_a_body_in_utf16_or_with_a_utf8_byte_order_mark_is_still_read() -> None:
    for body in ('{"model": "café"}'.encode("utf-16"), '{"model": "café"}'.encode("utf-8-sig")):
        assert parse_json(body) == {"model": "café"}


@pytest.mark.parametrize(
    ("messages", "says", "param"),
    [
        ([], "field 'messages' has no user or assistant message: send the request", "messages"),
        ([{"role": "system", "content": "be nice"}], "field 'messages' has no user or assistant message", "messages"),
        (
            [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function"}]},
                {"role": "tool", "tool_call_id": "c1", "content": "42"},
                {"role": "user", "content": "and?"},
            ],
            "messages[1].tool_calls is not supported: the served agent runs its own tools",
            "messages[1]",
        ),
        (
            [{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "c1", "content": "42"}],
            "messages[1].role 'tool' (a tool's result) is not supported: the served agent runs its own tools",
            "messages[1]",
        ),
    ],
)
def test_tool_calls_and_results_and_an_empty_conversation_are_named(
    messages: list[dict[str, object]], says: str, param: str
) -> None:
    """An OpenAI conversation that used tools, or none at all, is refused saying that, not 'content must be'."""
    with pytest.raises(ApiError) as info:
        parse_chat({"model": "desk", "messages": messages})
    assert info.value.status == 400 and info.value.param == param
    assert info.value.message.startswith(says)


@pytest.mark.parametrize("body", [b"", b"  \r\n"])
def test_an_empty_body_is_refused_saying_it_is_empty(body: bytes) -> None:
    with pytest.raises(ApiError) as info:
        parse_json(body)
    assert info.value.body()["error"]["message"] == "the request body is empty: send a JSON object"
