r"""Finding the parts of a classifier's reply: key lines and JSON objects, in linear time.

Key lines:
    A line whose first word is ``route``, ``confidence`` or ``reason`` (ASCII, any case),
    followed by ``:`` or ``=``. Before the key only list bullets (``-``, ``*``, ``+``),
    numbers (``1.``, ``2)``), heading and quote marks (``#``, ``>``) and markdown emphasis
    (``*``, ``_``, backticks) may appear; between the key and the separator only emphasis
    and spaces. A quoted key (``"route": ...``) is JSON syntax, not a key line. Lines end
    at ``\n`` or ``\r``.

JSON objects:
    Decoded with :meth:`json.JSONDecoder.raw_decode` from each ``{`` that opens an object
    with a string key (``{"`` after optional whitespace), skipping every ``{`` inside an
    object already decoded and inside the given ranges (the values of key lines). Object
    keys are compared case-insensitively, and a repeated key keeps all of its values, so
    ``{"route": "a", "route": "b"}`` is seen as two routes.

Bounded work: key lines are found by one regular expression whose quantifiers never
compete for a character (a lead run is consumed atomically), so it visits each character a
constant number of times; at most :data:`MAX_KEY_LINES` are read. The JSON scan makes at
most :data:`MAX_JSON_ATTEMPTS` decode attempts, each costing at most the length of the
text, and resumes after an object it decoded or at the position where a decode failed; a
nesting too deep for the decoder ends the scan. Together the work stays linear in the
length of the reply.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any, Literal, NamedTuple

__all__ = [
    "KeyLine",
    "JsonScan",
    "key_lines",
    "json_objects",
    "ascii_lower",
    "json_type",
    "MAX_KEY_LINES",
    "MAX_JSON_ATTEMPTS",
]

Key = Literal["route", "confidence", "reason"]

#: At most this many key lines are read; a reply with more is not read at all.
MAX_KEY_LINES = 64
#: At most this many ``{"`` positions are decoded per reply; beyond it the scan gives up.
MAX_JSON_ATTEMPTS = 64

_KEYS: dict[str, Key] = {"route": "route", "confidence": "confidence", "reason": "reason"}
_LEAD = r"[ \t\f\v\-*+>#_`.)0-9]"  # bullets, numbers, heading/quote marks, emphasis
# Run on "\n" + ascii_lower(text). "(?=(X*))\1" consumes the run X* atomically (a
# lookahead is never re-entered), so a long lead or emphasis run is not backtracked.
_KEY_LINE_RE = re.compile(
    r"[\n\r](?=[ \t\f\v\-*+>#_`.)0-9rc])"
    rf"(?=({_LEAD}*))\1(?<![a-z0-9])(route|confidence|reason)(?![a-z0-9])"
    r"(?=([ \t*_`]*))\3[:=]([^\n\r]*)"
)
_JSON_START_RE = re.compile(r'\{[ \t\n\r]*"')
_ASCII_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_LOWER_TABLE = str.maketrans(_ASCII_UPPER, _ASCII_UPPER.lower())


def ascii_lower(text: str) -> str:
    """``text`` with ASCII letters lower-cased and every other character unchanged."""
    if text.isascii():
        return text.lower()
    try:  # bytes.lower() changes ASCII letters only: same characters at the same positions
        return text.encode("utf-8", "surrogatepass").lower().decode("utf-8", "surrogatepass")
    except UnicodeError:  # pragma: no cover - every str encodes with surrogatepass
        return text.translate(_LOWER_TABLE)


class KeyLine(NamedTuple):
    """One ``key: value`` line.

    Attributes:
        key: ``"route"``, ``"confidence"`` or ``"reason"``.
        value: The text after the separator, up to the end of the line (not cleaned).
        start: Offset of the value in the reply.
        end: Offset of the end of the line.
    """

    key: Key
    value: str
    start: int
    end: int


def key_lines(text: str) -> list[KeyLine] | None:
    """Every key line of ``text`` in order, or ``None`` when there are more than :data:`MAX_KEY_LINES`."""
    matches = list(islice(_KEY_LINE_RE.finditer("\n" + ascii_lower(text)), MAX_KEY_LINES + 1))
    if len(matches) > MAX_KEY_LINES:
        return None
    # offsets in text are one less than in the searched string (the "\n" put in front)
    return [KeyLine(_KEYS[m[2]], text[m.start(4) - 1 : m.end(4) - 1], m.start(4) - 1, m.end(4) - 1) for m in matches]


def _as_object(pairs: tuple[tuple[str, Any], ...]) -> dict[str, list[Any]]:
    """Keys stripped and ASCII-lower-cased; a repeated key keeps all of its values."""
    obj: dict[str, list[Any]] = {}
    for k, v in pairs:
        obj.setdefault(ascii_lower(k.strip()), []).append(v)
    return obj


def json_type(value: object) -> str:
    """The JSON name of a decoded value's type (objects decode to tuples of pairs)."""
    if isinstance(value, tuple):
        return "object"
    if isinstance(value, list):
        return "list"
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    return "number" if isinstance(value, (int, float)) else "string"


# Objects decode to tuples of (key, value) pairs, the cheapest form for the C scanner to
# build (nested objects are never looked at) and one that keeps repeated keys.
_DECODER = json.JSONDecoder(object_pairs_hook=tuple)


@dataclass(frozen=True, slots=True)
class JsonScan:
    """What :func:`json_objects` found.

    Attributes:
        objects: The top-level objects, in order (keys lower-cased, values as lists).
        gave_up: Why the scan stopped early (``""`` when it read the whole text).
    """

    objects: tuple[dict[str, list[Any]], ...]
    gave_up: str = ""


def json_objects(text: str, skip: Sequence[tuple[int, int]] = ()) -> JsonScan:
    """The top-level JSON objects in ``text``, outside the sorted ``skip`` ranges."""
    found: list[dict[str, list[Any]]] = []
    pos = attempts = si = 0
    while True:
        m = _JSON_START_RE.search(text, pos)
        if m is None:
            return JsonScan(tuple(found))
        start = m.start()
        while si < len(skip) and skip[si][1] <= start:
            si += 1
        if si < len(skip) and skip[si][0] <= start:
            pos = skip[si][1]
            continue
        if attempts == MAX_JSON_ATTEMPTS:
            return JsonScan(tuple(found), f"more than {MAX_JSON_ATTEMPTS} JSON objects")
        attempts += 1
        try:
            obj, end = _DECODER.raw_decode(text, start)
        except json.JSONDecodeError as exc:  # not JSON from here: go on where it broke
            pos = max(start + 1, exc.pos)
            continue
        except ValueError:  # an integer too long to convert
            pos = start + 1
            continue
        except RecursionError:
            return JsonScan(tuple(found), "JSON nested too deeply")
        found.append(_as_object(obj))
        pos = end
