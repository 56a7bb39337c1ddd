"""The classification parser: any text -> :class:`Classification`.

:func:`parse_classification` is pure and total: it never raises, and the confidence it
returns is always within [0, 1]. It reads either ``key: value`` lines or a JSON object.

Lines:
    One key per line, anchored at the line start, so ``reroute: billing`` is not a route.
    Keys are ``route``, ``confidence`` and ``reason``, case-insensitive, separated from the
    value by ``:`` or ``=``. Markdown emphasis (``**``, ``*``, ``_``), backticks, quotes,
    list bullets and heading marks around keys and values are ignored, as is trailing
    punctuation on values.

JSON:
    An object with ``route`` / ``confidence`` / ``reason`` keys, bare or inside a
    ```` ```json ```` fence, anywhere in the text.

Route names match declared routes case-insensitively, with spaces, ``-`` and ``_``
interchangeable (``Tech Support`` matches ``tech-support``). A value that starts with a
declared name followed by other words (``billing, because ...``) matches that name.

Confidence accepts decimals, scientific notation and percentages (``85%`` is 0.85).

Policy for a missing or bad confidence (worded, NaN, infinite, negative, above 1): by
default it **fails closed** — the status is ``missing_confidence`` or
``invalid_confidence``, the confidence is 0.0, and the Router treats it like any other
non-``ok`` status (fallback, else unresolved). Pass ``on_bad_confidence=<value>`` to accept
the route with that confidence instead (the status is then ``ok``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

from .types import Classification, ParseStatus, RouteSpec

__all__ = ["parse_classification", "normalize_route_name", "format_classification"]

_SEP_RE = re.compile(r"[\s_\-]+")
_LINE_RE = re.compile(r"^(route|confidence|reason)\s*[:=]\s*(.*)$", re.IGNORECASE)
# list bullets, quote marks, headings and emphasis that may precede a key
_LEAD_RE = re.compile(r"^(?:[-*+>#]+\s+|\d+[.)]\s+)*[\s*_`\"']*")
_STRIP_CHARS = " \t*_`\"'\u201c\u201d\u2018\u2019<>[]()"
_TRAIL_PUNCT = ".,;:!?"
_NUM_RE = re.compile(r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_FENCE_RE = re.compile(r"```(?:json|JSON)?\s*(\{.*?\})\s*```", re.DOTALL)
_KEY_AT_END_RE = re.compile(r"[\s*_`\"']+$")


def normalize_route_name(name: str) -> str:
    """The matching key of a route name: lower case, runs of spaces/``-``/``_`` as ``-``."""
    return _SEP_RE.sub("-", name.strip()).strip("-").lower()


def format_classification(route: str, confidence: float) -> str:
    """The canonical reply text that :func:`parse_classification` reads back exactly."""
    return f"route: {route}\nconfidence: {confidence!r}"


def _clean_value(value: str) -> str:
    v = value.strip().strip(_STRIP_CHARS)
    while v and v[-1] in _TRAIL_PUNCT:
        v = v[:-1].rstrip(_STRIP_CHARS)
    return v


_HEAD_SPLIT_RE = re.compile(r"\s*(?:[,;:(\[{]|\s[-\u2013\u2014]\s|\.\s)")


def _match_route(value: str, index: Mapping[str, str]) -> str | None:
    key = normalize_route_name(value)
    if key in index:
        return index[key]
    # A declared name followed by punctuation and other words: "billing, because ..."
    # or "tech support (api errors)". Words without punctuation are not guessed at.
    head = _HEAD_SPLIT_RE.split(value, maxsplit=1)[0]
    if head != value:
        hkey = normalize_route_name(_clean_value(head))
        if hkey in index:
            return index[hkey]
    return None


def _parse_confidence(value: Any) -> float | None:
    """A confidence in [0, 1], or None when missing, worded or out of range."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        x = float(value)
        return x if math.isfinite(x) and 0.0 <= x <= 1.0 else None
    if not isinstance(value, str):
        return None
    v = value.strip().strip(_STRIP_CHARS)
    m = _NUM_RE.match(v)
    if m is None:
        return None
    try:
        x = float(m.group(0))
    except (ValueError, OverflowError):
        return None
    rest = v[m.end() :].lstrip()
    if rest.startswith("%"):
        x = x / 100.0
    if not math.isfinite(x) or x < 0.0 or x > 1.0:
        return None
    return x


def _from_json(text: str) -> dict[str, Any] | None:
    candidates: list[str] = [m.group(1) for m in _FENCE_RE.finditer(text)]
    start = text.find("{")
    end = text.rfind("}")
    if start >= 0 and end > start:
        candidates.append(text[start : end + 1])
    for c in candidates:
        try:
            obj = json.loads(c)
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, dict):
            lowered = {str(k).strip().lower(): v for k, v in obj.items()}
            if "route" in lowered:
                return lowered
    return None


def parse_classification(
    text: object,
    routes: Iterable[str | RouteSpec],
    *,
    on_bad_confidence: float | None = None,
) -> Classification:
    """Read a route and a confidence from a classifier's reply.

    Args:
        text: The reply. Any value is accepted; non-strings are treated as empty.
        routes: The declared route names (or RouteSpecs).
        on_bad_confidence: ``None`` (default) fails closed on a missing or invalid
            confidence; a number in [0, 1] is used instead and the status stays ``ok``.

    Returns:
        A :class:`Classification`; never raises.
    """
    try:
        return _parse(text, routes, on_bad_confidence)
    except Exception:  # totality: a bug here must not crash a run
        raw = text if isinstance(text, str) else ""
        return Classification(None, 0.0, "missing_route", raw)


@lru_cache(maxsize=256)
def _route_index(routes: tuple[str | RouteSpec, ...]) -> dict[str, str]:
    index: dict[str, str] = {}
    for r in routes:
        name = r.name if isinstance(r, RouteSpec) else str(r)
        index.setdefault(normalize_route_name(name), name)
    return index


def _parse(text: object, routes: Iterable[str | RouteSpec], on_bad: float | None) -> Classification:
    raw = text if isinstance(text, str) else ""
    routes_t = routes if isinstance(routes, tuple) else tuple(routes)
    try:
        index = _route_index(routes_t)
    except TypeError:  # unhashable route objects: build the index without the cache
        index = _route_index.__wrapped__(routes_t)
    if not raw.strip():
        return Classification(None, 0.0, "empty", raw)

    route_values: list[str] = []
    conf_values: list[Any] = []
    reason: str | None = None
    obj = _from_json(raw) if "{" in raw else None
    if obj is not None:
        rv = obj.get("route")
        route_values = [str(rv)] if rv is not None else []
        if "confidence" in obj:
            conf_values = [obj["confidence"]]
        if obj.get("reason") is not None:
            reason = str(obj["reason"])
    else:
        for line in raw.splitlines():
            stripped = _LEAD_RE.sub("", line.strip(), count=1)
            m = _LINE_RE.match(stripped)
            if m is None:
                # tolerate "**route**: x" — emphasis between key and separator
                m2 = re.match(r"^(route|confidence|reason)[\s*_`\"']*\s*[:=]\s*(.*)$", stripped, re.IGNORECASE)
                if m2 is None:
                    continue
                m = m2
            key = m.group(1).lower()
            value = m.group(2)
            if key == "route":
                route_values.append(value)
            elif key == "confidence":
                conf_values.append(value)
            elif reason is None:
                reason = _clean_value(value) or None

    if not route_values:
        return Classification(None, 0.0, "missing_route", raw, reason)
    matched: list[str | None] = [_match_route(_clean_value(v), index) for v in route_values]
    found = {m for m in matched if m is not None}
    if len(found) > 1:
        return Classification(None, 0.0, "ambiguous_route", raw, reason, requested=_clean_value(route_values[0]))
    if not found:
        requested = _clean_value(route_values[0])
        status: ParseStatus = "unknown_route" if requested else "missing_route"
        return Classification(None, 0.0, status, raw, reason, requested=requested or None)
    route = found.pop()

    confidence: float | None = None
    conf_status: ParseStatus = "missing_confidence"
    for cv in conf_values:
        confidence = _parse_confidence(cv)
        conf_status = "invalid_confidence"
        if confidence is not None:
            break
    if confidence is None:
        if on_bad is not None and isinstance(on_bad, (int, float)) and 0.0 <= on_bad <= 1.0:
            return Classification(route, float(on_bad), "ok", raw, reason)
        return Classification(route, 0.0, conf_status, raw, reason)
    return Classification(route, confidence, "ok", raw, reason)
