"""Turn provider SDK exceptions into :class:`~jeeves_router.errors.ModelError` with a severity.

The mapping works on the exception classes the ``openai`` and ``anthropic`` SDKs share
(``APIStatusError``, ``APIConnectionError``, ``APITimeoutError``, ...) and on the HTTP
transport's own errors (``httpx`` or ``httpx2``), matched by class name so that this
module imports neither SDK and works across their versions.

Retriable: 408, 409, 425, 429, 499 and every 5xx (Anthropic's 529 "overloaded" included),
connection failures, timeouts and malformed response bodies or event streams. Not
retried (``"critical"``): every other 4xx, and any error that says the prompt is too long
for the context window or was stopped by a content filter, whatever its status.
"""

from __future__ import annotations

import email.utils
import json
import time
from collections.abc import Iterable, Mapping
from typing import Any

from .._log import redact
from ..errors import ModelError

__all__ = ["map_sdk_error", "never_sent", "redact", "parse_retry_after", "should_retry"]

_RETRIABLE_STATUS = frozenset({408, 409, 425, 429, 499})
# Anthropic reports some failures inside a 200 event stream as ``event: error``; the SDK
# raises them with the stream's status, so the error type in the body decides.
_ERROR_TYPE_STATUS = {
    "overloaded_error": 529,
    "api_error": 500,
    "rate_limit_error": 429,
    "timeout_error": 504,
    "request_too_large": 413,
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "billing_error": 402,
    "server_error": 500,
}
_CONTEXT_MARKERS = ("context_length_exceeded", "maximum context length", "prompt is too long", "context window")
_FILTER_MARKERS = ("content_filter", "content_policy_violation", "content management policy", "content filter")
_MAX_MESSAGE = 500


def should_retry(headers: Mapping[str, str] | None) -> str | None:
    """The server's ``x-should-retry`` answer, ``"true"`` or ``"false"`` (``None``: not given).

    The OpenAI and Anthropic SDKs obey it before their status rules; with their retries off,
    the adapters' retries and the recovery ladder obey it through the error's severity. A
    jeeves-router server sends ``false`` with a 5xx about a run that started (running it again
    could repeat its side effects).
    """
    if not headers:
        return None
    value = next((v for k, v in headers.items() if k.lower() == "x-should-retry"), None)
    value = value.strip().lower() if isinstance(value, str) else None
    return value if value in ("true", "false") else None


def parse_retry_after(headers: Mapping[str, str] | None, *, now: float | None = None) -> float | None:
    """Seconds the server asked us to wait, from ``retry-after-ms`` or ``retry-after``.

    ``retry-after`` may be a number of seconds or an HTTP date. Returns ``None`` when
    neither header is present or parseable.
    """
    if not headers:
        return None
    lowered = {k.lower(): v for k, v in headers.items()}
    raw_ms = lowered.get("retry-after-ms")
    if raw_ms is not None:
        try:
            value = float(raw_ms) / 1000.0
        except ValueError:
            value = -1.0
        if value >= 0:
            return value
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    try:
        seconds = float(raw)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    return max(seconds, 0.0)


def _class_names(exc: BaseException) -> set[str]:
    return {cls.__name__ for cls in type(exc).__mro__}


#: httpx's failures to open a connection: the request was never sent.
_NOT_SENT = frozenset({"ConnectError", "ConnectTimeout"})


def never_sent(exc: BaseException) -> bool:
    """Whether ``exc`` (or an exception it was raised from) says the connection never opened."""
    seen = 0
    current: BaseException | None = exc
    while current is not None and seen < 8:
        if _from_transport(current) and not _NOT_SENT.isdisjoint(_class_names(current)):
            return True
        current, seen = current.__cause__ or current.__context__, seen + 1
    return False


def _from_transport(exc: BaseException) -> bool:
    return any(cls.__module__.split(".")[0] in {"httpx", "httpx2", "httpcore"} for cls in type(exc).__mro__)


def _body_error(body: object) -> tuple[str | None, str | None, str | None]:
    """(error type, error code, message) from an OpenAI or Anthropic error body."""
    if isinstance(body, Mapping) and isinstance(body.get("error"), Mapping):
        body = body["error"]
    if not isinstance(body, Mapping):
        return None, None, None

    def _str(key: str) -> str | None:
        value = body.get(key)
        return str(value) if value is not None else None

    return _str("type"), _str("code"), _str("message")


def _status_severity(status: int) -> str:
    return "retriable" if status in _RETRIABLE_STATUS or status >= 500 else "critical"


def _scrub(exc: BaseException, secrets: tuple[str, ...]) -> None:
    """Mask ``secrets`` and key-shaped text in the text of ``exc`` and of its causes, in place.

    A provider may quote the request's key in its error (a self-hosted server, a proxy). The
    SDK's exception becomes the :class:`ModelError`'s ``__cause__``, so every traceback that
    a log handler, a task runner (DBOS) or a web server prints would show it; its ``args``
    and ``message`` are what a traceback prints.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < 8:
        seen.add(id(current))
        try:
            args = tuple(redact(a, secrets) if isinstance(a, str) else a for a in current.args)
            if args != current.args:
                current.args = args
            message = getattr(current, "message", None)
            if isinstance(message, str) and (masked := redact(message, secrets)) != message:
                current.message = masked  # type: ignore[attr-defined]
        except (AttributeError, TypeError):  # a read-only attribute: left as it is
            pass
        current = current.__cause__ or current.__context__


def map_sdk_error(exc: BaseException, *, provider: str, secrets: Iterable[str] = ()) -> ModelError | None:
    """The :class:`ModelError` for ``exc``, or ``None`` when ``exc`` is not a provider failure.

    The caller raises the result ``from exc`` so the original stays as ``__cause__``.
    ``metadata["kind"]`` names the failure: ``"status"``, ``"timeout"``, ``"connection"``,
    ``"malformed_response"``, ``"context_length"`` or ``"content_filter"``. Messages are
    redacted (``secrets`` and key-shaped strings masked) and shortened. The original is
    redacted in place too (see :func:`_scrub`), since any logged traceback prints it.
    """
    if isinstance(exc, ModelError):
        return exc
    names = _class_names(exc)
    secrets = tuple(secrets)

    def build(message: str, severity: str, kind: str, **extra: Any) -> ModelError:
        _scrub(exc, secrets)  # a provider failure: its text is redacted where it is kept too
        text = redact(message, secrets)
        if len(text) > _MAX_MESSAGE:
            text = text[:_MAX_MESSAGE] + "..."
        metadata = {"kind": kind, "error_class": type(exc).__name__}
        return ModelError(f"{provider}: {text}", severity=severity, provider=provider, metadata=metadata, **extra)

    if "APIStatusError" in names:
        status = getattr(exc, "status_code", None)
        status = status if isinstance(status, int) else 0
        err_type, code, body_message = _body_error(getattr(exc, "body", None))
        if status < 400 and err_type in _ERROR_TYPE_STATUS:
            status = _ERROR_TYPE_STATUS[err_type]
        message = body_message or str(getattr(exc, "message", None) or exc)
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None)
        haystack = " ".join(x for x in (err_type, code, message) if x).lower()
        kind, severity = "status", _status_severity(status)
        if any(marker in haystack for marker in _CONTEXT_MARKERS):
            kind, severity = "context_length", "critical"
        elif any(marker in haystack for marker in _FILTER_MARKERS):
            kind, severity = "content_filter", "critical"
        else:  # the server's own word, as the provider SDKs (whose retries are off) would take it
            severity = {"true": "retriable", "false": "critical"}.get(should_retry(headers) or "", severity)
        retry_after = parse_retry_after(headers) if severity == "retriable" else None
        label = f"HTTP {status}" + (f" {err_type}" if err_type else "")
        return build(f"{label}: {message}", severity, kind, status_code=status, retry_after_s=retry_after)
    if "APITimeoutError" in names or (_from_transport(exc) and "TimeoutException" in names):
        return build(f"request timed out ({type(exc).__name__})", "retriable", "timeout")
    if "APIConnectionError" in names or (_from_transport(exc) and "TransportError" in names):
        detail = str(exc) or type(exc).__name__
        return build(f"connection failed: {detail}", "retriable", "connection")
    if "APIResponseValidationError" in names or isinstance(exc, json.JSONDecodeError):
        return build(f"malformed response: {exc}", "retriable", "malformed_response")
    if "ContentFilterFinishReasonError" in names:
        return build(str(exc), "critical", "content_filter")
    if "APIError" in names and type(exc).__module__.split(".")[0] in {"openai", "anthropic"}:
        # Errors reported inside an event stream (OpenAI ``{"error": ...}`` chunks).
        err_type, code, body_message = _body_error(getattr(exc, "body", None))
        haystack = " ".join(x for x in (err_type, code, body_message, str(exc)) if x).lower()
        if any(marker in haystack for marker in _CONTEXT_MARKERS):
            return build(str(exc), "critical", "context_length")
        if any(marker in haystack for marker in _FILTER_MARKERS):
            return build(str(exc), "critical", "content_filter")
        status = _ERROR_TYPE_STATUS.get(err_type or "", 500)
        return build(f"stream error: {exc}", _status_severity(status), "stream_error", status_code=status)
    return None
