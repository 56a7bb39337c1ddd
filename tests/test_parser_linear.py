"""The parser's linear-time structure, checked without timing anything (issue 15, item 1).

Two kinds of checks:

- The structure of every regular expression the parser uses (parsed with the ``re``
  module's own parser): no unbounded quantifier is followed by another quantifier that can
  match the same characters (``\\s*\\s*``, ``\\s* \\s*``), none sits inside another
  repeated group (``(a+b)*``), none starts a searched pattern that can still fail after
  it (``\\s*(?:,|;)`` rescans every whitespace run from each position), and no run that
  can fail after it matches the pattern's first character (the old fence pattern's
  ``\\{.*?\\}`` scanned to the end of the text from every fence). Known quadratic
  patterns are fed to the checker to show it rejects them.
- The work done in Python per reply: the number of Python-level function calls is the
  same for a 1 KB and a 100 KB adversarial reply, so what grows with the input runs inside
  the regex engine and the JSON decoder, over patterns that pass the first check and a
  bounded number of decode attempts.
"""

from __future__ import annotations

import gc
import importlib
import json
import re
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from jeeves_router import parse_classification
from jeeves_router.classify import confidence, parser, reply

# The re module's own pattern parser (``sre_parse`` before Python 3.11).
sre_parse: Any = importlib.import_module("re._parser" if sys.version_info >= (3, 11) else "sre_parse")

ROUTES = ("billing", "technical", "general")
ALPHABET = [chr(i) for i in range(0x300)] + ["\u2013", "\u2014", "\u200b", "\u2028", "\u3000", "\uff10"]
_CATEGORIES = {
    "CATEGORY_DIGIT": r"\d",
    "CATEGORY_NOT_DIGIT": r"\D",
    "CATEGORY_SPACE": r"\s",
    "CATEGORY_NOT_SPACE": r"\S",
    "CATEGORY_WORD": r"\w",
    "CATEGORY_NOT_WORD": r"\W",
}
_ZERO_WIDTH = {"AT", "ASSERT", "ASSERT_NOT"}
_REPEATS = {"MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"}

Node = tuple[Any, Any]


def _name(node: Node) -> str:
    return str(node[0])


def _in_set(items: list[Node]) -> set[str]:
    chars: set[str] = set()
    negate = False
    for op, av in items:
        name = str(op)
        if name == "NEGATE":
            negate = True
        elif name == "LITERAL":
            chars.add(chr(av))
        elif name == "RANGE":
            chars.update(ch for ch in ALPHABET if av[0] <= ord(ch) <= av[1])
        elif name == "CATEGORY":
            rx = re.compile(_CATEGORIES[str(av)])
            chars.update(ch for ch in ALPHABET if rx.fullmatch(ch))
        else:  # pragma: no cover - a construct the checker does not know
            raise AssertionError(f"unknown set item {name}")
    return set(ALPHABET) - chars if negate else chars


def chars_of(seq: list[Node]) -> set[str]:
    """Every character any node of ``seq`` can consume (an over-approximation)."""
    out: set[str] = set()
    for node in seq:
        name, av = _name(node), node[1]
        if name == "LITERAL":
            out.add(chr(av))
        elif name == "NOT_LITERAL":
            out.update(set(ALPHABET) - {chr(av)})
        elif name == "ANY":
            out.update(set(ALPHABET) - {"\n"})
        elif name == "IN":
            out.update(_in_set(av))
        elif name == "SUBPATTERN":
            out.update(chars_of(list(av[-1])))
        elif name == "BRANCH":
            for alt in av[1]:
                out.update(chars_of(list(alt)))
        elif name in _REPEATS or name == "ATOMIC_GROUP":
            out.update(chars_of(list(av[-1] if name in _REPEATS else av)))
    return out


def _unbounded(node: Node) -> bool:
    return _name(node) in _REPEATS and node[1][1] == sre_parse.MAXREPEAT


def _leading_repeats(seq: list[Node], against: set[str]) -> Iterator[Node]:
    """Repeats (max > 1) that can match right at the start of ``seq``, looking through
    zero-width nodes, groups, alternatives, optional nodes and single characters that
    ``against`` also matches."""
    for node in seq:
        name, av = _name(node), node[1]
        if name in _ZERO_WIDTH:
            continue
        if name in _REPEATS:
            if av[1] > 1:
                yield node
            else:
                yield from _leading_repeats(list(av[2]), against)
            if av[0] == 0:
                continue  # may match nothing: what follows is adjacent too
            return
        if name == "SUBPATTERN":
            yield from _leading_repeats(list(av[-1]), against)
            return
        if name == "BRANCH":
            for alt in av[1]:
                yield from _leading_repeats(list(alt), against)
            return
        if name in ("LITERAL", "IN", "ANY", "NOT_LITERAL") and chars_of([node]) & against:
            continue  # "\s* \s*": the second run still competes with the first
        return


def _can_fail(seq: list[Node]) -> bool:
    return any(not (_name(n) in _REPEATS and n[1][0] == 0) for n in seq)


def violations(pattern: re.Pattern[str]) -> list[str]:
    """Why ``pattern`` may take more than linear time (empty when its structure is safe)."""
    found: list[str] = []
    tree = list(sre_parse.parse(pattern.pattern, pattern.flags))

    def walk(seq: list[Node], inside_repeat: bool) -> None:
        for i, node in enumerate(seq):
            name, av = _name(node), node[1]
            if _unbounded(node):
                if inside_repeat:
                    found.append("an unbounded quantifier inside a repeated group")
                body = chars_of(list(av[2]))
                for nxt in _leading_repeats(list(seq[i + 1 :]), body):
                    if chars_of(list(nxt[1][2])) & body:
                        found.append("adjacent quantifiers that can match the same character")
            if name in _REPEATS:
                walk(list(av[2]), inside_repeat or av[1] > 1)
            elif name == "SUBPATTERN":
                walk(list(av[-1]), inside_repeat)
            elif name == "BRANCH":
                for alt in av[1]:
                    walk(list(alt), inside_repeat)
            elif name in ("ASSERT", "ASSERT_NOT"):
                walk(list(av[1]), inside_repeat)

    def starts_with_failing_run(seq: list[Node]) -> bool:
        lead = 0
        while lead < len(seq) and _name(seq[lead]) in _ZERO_WIDTH:
            lead += 1
        body = seq[lead:]
        if not body:
            return False
        first = body[0]
        if _name(first) == "BRANCH":
            return any(starts_with_failing_run(list(alt)) for alt in first[1][1])
        if _name(first) == "SUBPATTERN":
            return starts_with_failing_run(list(first[1][-1]) + body[1:])
        return _unbounded(first) and _can_fail(body[1:])

    def flat(seq: list[Node]) -> list[Node]:
        out: list[Node] = []
        for n in seq:
            out.extend(flat(list(n[1][-1])) if _name(n) == "SUBPATTERN" else [n])
        return out

    walk(tree, False)
    if starts_with_failing_run(tree):
        found.append("a searched pattern that starts with an unbounded quantifier and can fail after it")
    top = flat(tree)
    first = next((n for n in top if _name(n) not in _ZERO_WIDTH), None)
    starts = chars_of([first]) if first is not None and not _unbounded(first) else set()
    for i, node in enumerate(top):
        if _unbounded(node) and chars_of(list(node[1][2])) & starts and _can_fail(top[i + 1 :]):
            found.append("an unbounded run that can cross where a later match attempt starts")
    return found


def parser_patterns() -> list[tuple[str, re.Pattern[str]]]:
    out = []
    for module in (parser, reply, confidence):
        for name, value in vars(module).items():
            if isinstance(value, re.Pattern):
                out.append((f"{module.__name__.rsplit('.', 1)[1]}.{name}", value))
    return out


def test_the_parser_uses_regular_expressions() -> None:
    names = {n for n, _ in parser_patterns()}
    assert {"reply._KEY_LINE_RE", "reply._JSON_START_RE", "parser._HEAD_END_RE", "confidence._NUMBER_RE"} <= names


@pytest.mark.parametrize(("name", "pattern"), parser_patterns(), ids=lambda x: x if isinstance(x, str) else "")
def test_no_regex_can_backtrack_quadratically(name: str, pattern: re.Pattern[str]) -> None:
    assert violations(pattern) == [], name


@pytest.mark.parametrize(
    "source",
    [
        r"\s*(?:[,;:(\[{]|\s[-\u2013\u2014]\s|\.\s)",  # the old _HEAD_SPLIT_RE
        r"^(?:[-*+>#]+\s+|\d+[.)]\s+)*[\s*_`\"']*",  # the old _LEAD_RE
        r"route\s*[:=]?\s*(\S+)",  # two whitespace runs around an optional separator
        r"route\s* \s*x",  # two whitespace runs around a space
        r"```(?:json)?\s*(\{.*?\})\s*```",  # the old _FENCE_RE
        r"(a|aa)+b",
    ],
)
def test_the_checker_rejects_known_quadratic_patterns(source: str) -> None:
    assert violations(re.compile(source, re.DOTALL)) != []


# -- Python-level work does not grow with the reply -------------------------------------------


def _fill(head: str, unit: str, tail: str, size: int) -> str:
    room = max(0, size - len(head) - len(tail))
    return head + unit * (room // len(unit)) + " " * (room % len(unit)) + tail


SHAPES: dict[str, Callable[[int], str]] = {
    "key_then_spaces": lambda n: _fill("route", " ", "x", n),
    "value_then_spaces": lambda n: _fill("route: billing", " ", "x", n),
    "json_fences": lambda n: _fill("", "```json {", "", n),
    "space_commas": lambda n: _fill("route: billing", " ,", "", n),
    "newlines": lambda n: _fill("route: billing\nconfidence: 0.9", "\n", "", n),
    "nested_braces": lambda n: _fill("", "{", "", n),
    "nested_objects": lambda n: _fill("", '{"a":', "", n),
    "open_strings": lambda n: _fill("", '{"', "", n),
    "many_objects": lambda n: _fill("", '{"a":1}', "", n),
    "route_lines": lambda n: _fill("", "route: billing\n", "confidence: 0.9", n),
    "key_words": lambda n: _fill("", "x route\n", "", n),
    "list_value": lambda n: _fill("route: billing", ", billing", "\nconfidence: 0.9", n),
    "zero_width": lambda n: _fill("route: bill", "\u200b", "ing", n),
    "fenced_reply": lambda n: _fill("```json\n", " ", '{"route": "billing", "confidence": 0.9}\n```', n),
}


def python_calls(text: str) -> int:
    """How many Python-level and builtin function calls one parse makes."""
    parse_classification(text, ROUTES)  # warm the route index cache
    count = 0

    def profile(frame: object, event: str, arg: object) -> None:
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    # A collection during the parse would run finalisers of other tests' garbage (generators,
    # sockets) under the profiler and count their calls: collect first, then keep it off.
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    sys.setprofile(profile)
    try:
        parse_classification(text, ROUTES)
    finally:
        sys.setprofile(None)
        if enabled:
            gc.enable()
    return count


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_python_work_is_the_same_at_1kb_and_100kb(shape: str) -> None:
    small, large = (python_calls(SHAPES[shape](size)) for size in (1024, 100 * 1024))
    assert large <= small + 2, (small, large)


def test_decode_attempts_are_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    decoder = reply._DECODER

    class Counting(json.JSONDecoder):
        def raw_decode(self, s: str, idx: int = 0) -> tuple[Any, int]:
            calls.append(idx)
            return decoder.raw_decode(s, idx)

    monkeypatch.setattr(reply, "_DECODER", Counting())
    for text in ('{"' * 20_000, '{"a": 1} ' * 5_000, '{"a": "x"' * 5_000):
        calls.clear()
        c = parse_classification(text, ROUTES)
        assert c.status == "missing_route"
        assert len(calls) <= reply.MAX_JSON_ATTEMPTS
    calls.clear()
    # skipped: every "{" inside a decoded object, and inside key-line values
    inner = json.dumps({"route": "billing", "confidence": 0.9, "x": [{"a": i} for i in range(1000)]})
    assert parse_classification("reason: " + inner + "\n" + inner, ROUTES).status == "ok"
    assert calls == [len("reason: " + inner + "\n")]
