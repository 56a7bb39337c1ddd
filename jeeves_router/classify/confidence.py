"""Reading a confidence: one unambiguous number in [0, 1], or a named problem.

A confidence is accepted only when the value is a single number — a decimal (``0.85``,
``.5``, ``1``), scientific notation (``7e-1``) or a percentage (``85%``) — optionally
wrapped in quotes, brackets or markdown emphasis and followed by trailing punctuation.
Anything else fails closed, and the problem names what was seen: a fraction (``1/5``),
a range (``0.7-0.9``), ``x out of y``, a word (``high``), several numbers, a non-finite
or out-of-range value. Only ASCII digits count: look-alike digits are not numbers.

Every function here is linear in the length of its input.
"""

from __future__ import annotations

import math
import re

from .._articles import a_type

__all__ = ["read_confidence", "VALUE_WRAP", "VALUE_TRAIL", "clean_value", "show"]

#: Characters that may wrap a value: ASCII spaces and tabs, markdown emphasis, quotes, brackets.
VALUE_WRAP = " \t\f\v*_`\"'\u201c\u201d\u2018\u2019<>[]()"
#: Trailing punctuation removed from a value (``billing.``, ``0.60.``).
VALUE_TRAIL = ".,;:!?"
_RSTRIP = VALUE_TRAIL + VALUE_WRAP

#: Longer confidence texts are not read (the longest float repr is 24 characters).
MAX_CONFIDENCE_CHARS = 64

# One number: no two adjacent quantifiers can match the same character.
_NUMBER_RE = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_ANY_NUMBER_RE = re.compile(r"[0-9]+(?:\.[0-9]+)?|\.[0-9]+")
_RANGE_SEPARATORS = frozenset({"-", "\u2013", "\u2014", "to", "and"})
_NOT_FINITE = frozenset({"nan", "+nan", "-nan", "inf", "+inf", "-inf", "infinity", "+infinity", "-infinity"})


def clean_value(value: str) -> str:
    """``value`` without wrapping decoration and trailing punctuation (one pass each way)."""
    return value.strip(VALUE_WRAP).rstrip(_RSTRIP)


def show(value: str, limit: int = 60) -> str:
    """``value`` quoted for a message, cut to ``limit`` characters; invisible ones escaped."""
    cut = value if len(value) <= limit else value[:limit] + "..."
    return repr(cut)


def _check(x: float, seen: str) -> tuple[float | None, str]:
    if not math.isfinite(x):
        return None, f"confidence {seen} is not a finite number"
    if not 0.0 <= x <= 1.0:
        return None, f"confidence {seen} is outside [0, 1]"
    return x + 0.0, ""  # + 0.0 turns -0.0 into 0.0


def _describe(v: str) -> str:
    """What a text that is not one number looks like."""
    if v.lower() in _NOT_FINITE:
        return "is not a finite number"
    numbers = list(_ANY_NUMBER_RE.finditer(v))
    if not numbers:
        return "is not a number"
    if len(numbers) == 1:
        return "has words besides the number"
    if "/" in v:
        return "is a fraction, not one number"
    if "out of" in v.lower():
        return "is 'x out of y', not one number"
    if len(numbers) == 2 and v[numbers[0].end() : numbers[1].start()].strip(" \t").lower() in _RANGE_SEPARATORS:
        return "is a range, not one number"
    return "has several numbers"


def read_confidence(value: object) -> tuple[float | None, str]:
    """Read one confidence value from a reply.

    Args:
        value: The text after ``confidence:``, or a JSON value (number or string).

    Returns:
        ``(confidence, "")`` with the confidence in [0, 1], or ``(None, problem)`` where
        the problem names what was seen, e.g. ``"confidence '1/5' is a fraction, not one
        number"``.

    Example:
        >>> from jeeves_router.classify.confidence import read_confidence
        >>> read_confidence("85%")
        (0.85, '')
        >>> read_confidence("0.7-0.9")[1]
        "confidence '0.7-0.9' is a range, not one number"
    """
    if isinstance(value, bool) or value is None:
        return None, f"confidence {'null' if value is None else str(value).lower()} is not a number"
    if isinstance(value, (int, float)):
        try:
            x = float(value)
        except OverflowError:  # a huge JSON integer
            return None, "confidence is a number outside [0, 1]"
        return _check(x, show(str(value)))
    if not isinstance(value, str):
        return None, f"confidence is {a_type(value)}, not a number"
    v = clean_value(value)
    if not v:
        return None, "confidence is empty"
    if len(v) > MAX_CONFIDENCE_CHARS:
        return None, f"confidence {show(value.strip())} is {len(v)} characters long, not one number"
    number, scale = v, 1.0
    if v[-1] == "%":
        number, scale = v[:-1].rstrip(" \t"), 100.0
    if _NUMBER_RE.fullmatch(number) is None:
        return None, f"confidence {show(value.strip())} {_describe(v)}"
    x = float(number) / scale
    if 0.0 <= x <= 1.0:  # False for NaN
        return x + 0.0, ""  # + 0.0 turns -0.0 into 0.0
    return _check(x, show(value.strip()))
