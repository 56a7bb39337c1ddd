"""The HTTP wire format: request validation, OpenAI-shaped replies and errors, SSE framing.

Pure functions over JSON-ready data; no I/O. Everything a client can get wrong raises
:class:`ApiError`, which becomes a 4xx reply in OpenAI's error shape
(``{"error": {"message", "type", "param", "code"}}``) naming the field at fault.
The replies and the SSE framing live in :mod:`._wire_replies` (exported here).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .._limits import EMPTY_REQUEST, blank
from ..ids import SESSION_ID, SESSION_ID_RULE
from ..messages import Message, assistant, user
from ._wire_replies import (
    DONE,
    chunk,
    completion,
    content_chunks,
    new_completion_id,
    routing_headers,
    routing_of,
    sse_data,
    sse_event,
    usage_chunk,
    usage_object,
)

__all__ = [
    "ApiError",
    "ChatRequest",
    "RunRequest",
    "error_body",
    "parse_json",
    "parse_chat",
    "parse_run",
    "routing_of",
    "routing_headers",
    "completion",
    "chunk",
    "usage_chunk",
    "usage_object",
    "content_chunks",
    "sse_data",
    "sse_event",
    "DONE",
    "new_completion_id",
]

_IGNORED_ROLES = ("system", "developer")


class ApiError(Exception):
    """A request the server refuses, as an HTTP status and an OpenAI-shaped error."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        type: str = "invalid_request_error",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.type = type
        self.headers = dict(headers or {})

    def body(self) -> dict[str, Any]:
        """The JSON error body."""
        return error_body(self.message, param=self.param, code=self.code, type=self.type)


def error_body(
    message: str, *, param: str | None = None, code: str | None = None, type: str = "invalid_request_error"
) -> dict[str, Any]:
    """OpenAI's error shape."""
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def parse_json(raw: bytes) -> dict[str, Any]:
    """The request body as a JSON object."""
    if not raw.strip():
        raise ApiError(400, "the request body is empty: send a JSON object", code="invalid_json")
    encoding = json.detect_encoding(raw)
    try:
        data = json.loads(raw.decode(encoding))  # strict: raw surrogate bytes are refused here too
    except RecursionError:
        raise ApiError(400, "the request body's JSON is nested too deeply", code="invalid_json") from None
    except UnicodeDecodeError as exc:
        raise ApiError(400, _not_text(raw, encoding, exc.start), code="invalid_json") from None
    except ValueError as exc:
        where = f" at line {exc.lineno} column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else ""
        read_as = "" if encoding.startswith("utf-8") else f" (read as {encoding.upper()}, as its zero bytes suggest)"
        raise ApiError(400, f"the request body is not valid JSON{where}{read_as}", code="invalid_json") from None
    if not isinstance(data, dict):
        raise ApiError(400, f"the request body must be a JSON object, got a JSON {type(data).__name__}")
    escapes = _SURROGATE_ESCAPE.search(raw) or not json.detect_encoding(raw).startswith("utf-8")
    at = _lone_surrogate_at(data) if escapes else None
    if at is not None:
        shown = at if len(at) <= 80 else at[:77] + "..."
        field = f"field {shown!r}" if at else "a key of the request body"
        raise ApiError(
            400,
            f"{field} has an unpaired UTF-16 surrogate (a \\ud800-\\udfff escape not part of a pair); send "
            "valid Unicode text",
            param=re.split(r"[.\[]", at, maxsplit=1)[0] or None,
            code="invalid_json",
        )
    return data


def _not_text(raw: bytes, encoding: str, start: int) -> str:
    """Where a body stops being text in the encoding JSON's first bytes gave (for a 400)."""
    name = "UTF-8" if encoding.startswith("utf-8") else encoding.upper()
    where = f"byte 0x{raw[start]:02x} at offset {start}"
    if name == "UTF-8":
        line, column = raw.count(b"\n", 0, start) + 1, start - raw.rfind(b"\n", 0, start)
        where += f", line {line} column {column}"
    return f"the request body is not {name} text ({where}): send the JSON encoded as UTF-8"


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")  # in UTF-8 JSON, only such an escape can leave one
_SURROGATE = re.compile("[\ud800-\udfff]")


def _lone_surrogate_at(data: dict[str, Any]) -> str | None:
    """Where a string (key or value) of parsed JSON holds a surrogate (a pair is joined by the parser).

    The first such value's field, as ``messages[0].content`` (for a key: the object that has
    it, ``""`` for the body's own keys), or ``None``. Such text cannot be encoded as UTF-8:
    the run's event stream (pydantic's JSON) could not be sent. (A loop, not a recursion:
    the body may be nested as deep as the JSON parser goes.)
    """
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, str):
            if _SURROGATE.search(value):
                return path
        elif isinstance(value, dict):
            if any(_SURROGATE.search(k) for k in value):
                return path
            stack += reversed([(f"{path}.{k}" if path else k, v) for k, v in value.items()])
        elif isinstance(value, list):
            stack += reversed([(f"{path}[{i}]", v) for i, v in enumerate(value)])
    return None


def _field(data: Mapping[str, Any], name: str, kind: type | tuple[type, ...], *, required: bool = False) -> Any:
    value = data.get(name)
    if value is None:
        if required:
            raise ApiError(400, f"missing required field {name!r}", param=name, code="missing_field")
        return None
    if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _types(kind)):
        names = " or ".join(t.__name__ for t in _types(kind))
        raise ApiError(400, f"field {name!r} must be {names}, got {type(value).__name__}", param=name)
    return value


def _types(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _session_id(data: Mapping[str, Any], header: str | None) -> str | None:
    sid: str | None = _field(data, "session_id", str)
    if sid is None:
        sid = header
    if sid is not None and not SESSION_ID.fullmatch(sid):
        raise ApiError(400, SESSION_ID_RULE, param="session_id")
    return sid


def _content(value: Any, where: str) -> str:
    """Message content: a string or a list of text parts."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        texts = []
        for i, part in enumerate(value):
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                msg = f"{where}.content[{i}] must be a text part {{'type': 'text', 'text': ...}}"
                raise ApiError(400, msg, param=where)
            texts.append(part["text"])
        return "".join(texts)
    raise ApiError(400, f"{where}.content must be a string or a list of text parts", param=where)


def _messages(value: Any, name: str) -> list[tuple[str, str]]:
    if not isinstance(value, list):
        raise ApiError(400, f"field {name!r} must be a list of messages", param=name)
    out: list[tuple[str, str]] = []
    for i, m in enumerate(value):
        where = f"{name}[{i}]"
        if not isinstance(m, dict):
            raise ApiError(400, f"{where} must be an object with 'role' and 'content'", param=where)
        role = m.get("role")
        if role in _IGNORED_ROLES:
            continue
        if role in ("tool", "function") or (role == "assistant" and (m.get("tool_calls") or m.get("function_call"))):
            what = f"{where}.role {role!r} (a tool's result)" if role != "assistant" else f"{where}.tool_calls"
            msg = f"{what} is not supported: the served agent runs its own tools; send the user and assistant text"
            raise ApiError(400, msg, param=where)
        if role not in ("user", "assistant"):
            raise ApiError(
                400, f"{where}.role must be 'system', 'developer', 'user' or 'assistant', got {role!r}", param=where
            )
        out.append((role, _content(m.get("content"), where)))
    return out


def _history(turns: list[tuple[str, str]]) -> tuple[Message, ...]:
    return tuple(user(text) if role == "user" else assistant(text) for role, text in turns)


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """A validated ``POST /v1/chat/completions`` body."""

    model: str
    prompt: str
    history: tuple[Message, ...]
    stream: bool
    include_usage: bool
    session_id: str | None
    idempotency_key: str | None = None  # the Idempotency-Key header (set by the app)


_UNSUPPORTED = ("tools", "functions", "tool_choice", "function_call", "response_format", "logprobs")


def parse_chat(data: Mapping[str, Any], *, session_header: str | None = None) -> ChatRequest:
    """Validate a chat completion request.

    The last user message (the request) must have text (:func:`~jeeves_router._limits.blank`, as
    the MCP ``ask`` refuses an empty request). ``system``/``developer`` messages are ignored
    (the served agent has its own instructions); the last message must be the user's request
    and the earlier ones are the history (none given: the session's stored history is used).
    """
    model = _field(data, "model", str, required=True)
    turns = _messages(_field(data, "messages", list, required=True), "messages")
    if not turns:
        raise ApiError(400, "field 'messages' has no user or assistant message: send the request", param="messages")
    if turns[-1][0] != "user":
        raise ApiError(400, "the last non-system message must have role 'user' (the request)", param="messages")
    if blank(turns[-1][1]):
        msg = f"{EMPTY_REQUEST} (the last user message has no text)"
        raise ApiError(400, msg, param="messages", code="empty_request")
    for name in _UNSUPPORTED:
        if data.get(name) not in (None, False, [], {}, "none", "auto", {"type": "text"}):
            raise ApiError(
                400, f"field {name!r} is not supported: the served agent brings its own tools and format", param=name
            )
    n = _field(data, "n", int)
    if n is not None and n != 1:
        raise ApiError(400, f"field 'n' must be 1 (one answer per request), got {n}", param="n")
    stream = bool(_field(data, "stream", bool))
    options = _field(data, "stream_options", dict) or {}
    include_usage = options.get("include_usage", False)
    if not isinstance(include_usage, bool):
        raise ApiError(400, "stream_options.include_usage must be a boolean", param="stream_options")
    return ChatRequest(
        model=model,
        prompt=turns[-1][1],
        history=_history(turns[:-1]),
        stream=stream,
        include_usage=include_usage,
        session_id=_session_id(data, session_header),
    )


@dataclass(frozen=True, slots=True)
class RunRequest:
    """A validated ``POST /v1/runs`` body."""

    model: str
    prompt: str
    history: tuple[Message, ...]
    session_id: str | None
    force_route: str | None
    context: dict[str, Any] = field(default_factory=dict)
    idempotency_key: str | None = None  # the Idempotency-Key header (set by the app)


def parse_run(data: Mapping[str, Any], *, session_header: str | None = None) -> RunRequest:
    """Validate a run request: ``model`` (the agent), ``input`` (not blank) and optional extras.

    The endpoint always streams the run's events: ``stream`` may be left out or ``true``;
    ``false`` is refused (400 naming the field), for a client asking for one JSON body would
    otherwise get an event stream it does not read as one.
    """
    model = _field(data, "model", str, required=True)
    prompt = _field(data, "input", str, required=True)
    if blank(prompt):
        raise ApiError(400, f"{EMPTY_REQUEST} (field 'input' has no text)", param="input", code="empty_request")
    if _field(data, "stream", bool) is False:
        raise ApiError(
            400,
            "field 'stream' must be true or left out: /v1/runs always streams the run's events (server-sent events); "
            "for the whole answer as one JSON body, POST /v1/chat/completions without stream",
            param="stream",
        )
    history = data.get("history")
    return RunRequest(
        model=model,
        prompt=prompt,
        history=_history(_messages(history, "history")) if history is not None else (),
        session_id=_session_id(data, session_header),
        force_route=_field(data, "force_route", str),
        context=dict(_field(data, "context", dict) or {}),
    )
