"""Hypothesis properties of the parser beyond the round trip (issue 15, item 5)."""

from __future__ import annotations

import json
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from jeeves_router import parse_classification
from jeeves_router.classify.parser import normalize_route_name
from tests.strategies import route_names

ROUTES = ["billing", "technical", "general", "tech-support"]
unit = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
any_float = st.floats(allow_nan=True, allow_infinity=True)

# A number token, exponent included: "7e-1" is one token, "0.7-0.9" two.
_TOKEN_RE = re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _bounded(c: object) -> None:
    from jeeves_router.classify.types import Classification

    assert isinstance(c, Classification)
    assert 0.0 <= c.confidence <= 1.0
    assert c.status == "ok" or c.confidence == 0.0
    assert c.route is None or c.route in ROUTES


# -- adversarial numbers ----------------------------------------------------------------


@settings(max_examples=300)
@given(
    unit,
    unit,
    st.sampled_from(
        [
            "{a}/{b}",
            "{a} / {b}",
            "{a}-{b}",
            "{a} - {b}",
            "{a} to {b}",
            "{a} out of {b}",
            "{a} {b}",
            "{a}, {b}",
            "{a} or {b}",
            "between {a} and {b}",
        ]
    ),
)
def test_two_numbers_never_give_a_confidence(a: float, b: float, form: str) -> None:
    value = form.format(a=a, b=b)
    c = parse_classification(f"route: billing\nconfidence: {value}", ROUTES)
    assert (c.status, c.confidence) == ("invalid_confidence", 0.0)
    assert c.reason is not None and value[:60] in c.reason


@settings(max_examples=300)
@given(any_float.filter(lambda x: not 0.0 <= x <= 1.0), st.sampled_from(["{x!r}", "{x}", "{p}%"]))
def test_out_of_range_and_non_finite_fail_closed(x: float, form: str) -> None:
    value = form.format(x=x, p=x * 100)  # "{p}%" says x again, as a percentage
    c = parse_classification(f"route: billing\nconfidence: {value}", ROUTES)
    assert (c.status, c.confidence) == ("invalid_confidence", 0.0)
    js = parse_classification(json.dumps({"route": "billing", "confidence": x}), ROUTES)
    assert (js.status, js.confidence) == ("invalid_confidence", 0.0)


@settings(max_examples=500)
@given(st.text(alphabet="0123456789.eE+-% /,xo utf()*", max_size=16))
def test_a_confidence_is_read_only_from_one_number(value: str) -> None:
    c = parse_classification(f"route: billing\nconfidence: {value}", ROUTES)
    _bounded(c)
    if c.status == "ok":
        core = value.strip(" ()*").rstrip(".,() *")
        tokens = _TOKEN_RE.findall(core)
        assert len(tokens) == 1, (value, tokens)
        number = core[:-1].rstrip() if core.endswith("%") else core
        expected = float(number) / (100.0 if core.endswith("%") else 1.0)
        assert c.confidence == expected + 0.0


# -- duplicated keys ----------------------------------------------------------------------


@settings(max_examples=200)
@given(st.sampled_from(ROUTES), st.sampled_from(ROUTES), unit, st.permutations(range(3)), st.booleans())
def test_two_route_lines_are_ambiguous_unless_equal(
    r1: str, r2: str, conf: float, order: list[int], as_json: bool
) -> None:
    if as_json:
        text = f'{{"route": "{r1}", "confidence": {conf!r}, "route": "{r2}"}}'
    else:
        lines = [f"route: {r1}", f"confidence: {conf!r}", f"route: {r2.upper()}"]
        text = "\n".join(lines[i] for i in order)
    c = parse_classification(text, ROUTES)
    if r1 == r2:
        assert (c.route, c.status, c.confidence) == (r1, "ok", conf)
    else:
        assert (c.route, c.status, c.confidence) == (None, "ambiguous_route", 0.0)


@settings(max_examples=200)
@given(st.sampled_from(ROUTES), unit, unit, st.booleans())
def test_duplicated_confidences_must_agree(route: str, c1: float, c2: float, as_json: bool) -> None:
    if as_json:
        text = f'{{"confidence": {c1!r}, "route": "{route}", "confidence": {c2!r}}}'
    else:
        text = f"confidence: {c1!r}\nroute: {route}\nconfidence: {c2!r}"
    c = parse_classification(text, ROUTES)
    if c1 == c2:
        assert (c.route, c.status, c.confidence) == (route, "ok", c1)
    else:
        assert (c.status, c.confidence) == ("invalid_confidence", 0.0)


# -- JSON embedded in values, fences, prose ------------------------------------------------


json_noise = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda kids: (
        st.lists(kids, max_size=3) | st.dictionaries(st.sampled_from(["route", "a", "confidence"]), kids, max_size=3)
    ),
    max_leaves=6,
)


@settings(max_examples=200)
@given(st.sampled_from(ROUTES), unit, st.sampled_from([*ROUTES, "refunds"]), unit, json_noise, st.text(max_size=20))
def test_json_inside_a_value_never_changes_the_lines(
    route: str, conf: float, other: str, other_conf: float, noise: object, before: str
) -> None:
    fragment = json.dumps({"route": other, "confidence": other_conf, "x": noise})
    before = before.replace("\n", " ").replace("\r", " ")
    for text in (
        f"route: {route}\nconfidence: {conf!r}\nreason: {before}{fragment}",
        f"reason: {before}{fragment}\nroute: {route}\nconfidence: {conf!r}",
    ):
        c = parse_classification(text, ROUTES)
        assert (c.route, c.status, c.confidence) == (route, "ok", conf)


@settings(max_examples=200)
@given(
    st.sampled_from(ROUTES),
    unit,
    st.sampled_from([None, 0, 2]),
    st.sampled_from(["", "```json\n", "```\n", "Sure! Here it is:\n"]),
    st.text(alphabet=st.sampled_from('ab {}[]":,.\n'), max_size=30),
    json_noise,
)
def test_a_json_reply_is_read_bare_fenced_or_with_prose(
    route: str, conf: float, indent: int | None, opening: str, prose: str, noise: object
) -> None:
    obj = json.dumps({"route": route, "confidence": conf, "extra": noise}, indent=indent)
    closing = "\n```" if opening.startswith("```") else ""
    prose = prose.replace('{"', "{ ")  # prose braces, but no second object with a string key
    c = parse_classification(f"{opening}{obj}{closing}\n{prose}", ROUTES)
    assert (c.route, c.status, c.confidence) == (route, "ok", conf)


@settings(max_examples=200)
@given(st.sampled_from(ROUTES), unit, st.sampled_from(ROUTES), unit)
def test_key_lines_win_over_json(route: str, conf: float, other: str, other_conf: float) -> None:
    obj = json.dumps({"route": other, "confidence": other_conf})
    for text in (
        f"```json\n{obj}\n```\nroute: {route}\nconfidence: {conf!r}",
        f"route: {route}\nconfidence: {conf!r}\n{obj}",
    ):
        c = parse_classification(text, ROUTES)
        assert (c.route, c.status, c.confidence) == (route, "ok", conf)


# -- unicode look-alikes and zero-width characters ------------------------------------------

INVISIBLE = ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad", "\u180e", "\u00a0", "\u3000", "\u202f"]
LOOK_ALIKES = {
    "a": "\u0430",
    "e": "\u0435",
    "o": "\u043e",
    "p": "\u0440",
    "c": "\u0441",
    "i": "\u0456",
    "s": "\u017f",
    "k": "\u212a",
    "l": "\u04cf",
    "h": "\u04bb",
    "g": "\u0261",
    "t": "\u0442",
}


@settings(max_examples=300)
@given(route_names, st.data())
def test_invisible_characters_inside_a_name_never_match(name: str, data: st.DataObject) -> None:
    pos = data.draw(st.integers(min_value=0, max_value=len(name)))
    char = data.draw(st.sampled_from(INVISIBLE))
    written = name[:pos] + char + name[pos:]
    c = parse_classification(f"route: {written}\nconfidence: 0.9", [name])
    assert c.status == "unknown_route" and c.route is None
    assert c.requested == written


@settings(max_examples=300)
@given(route_names, st.data())
def test_look_alike_letters_never_match(name: str, data: st.DataObject) -> None:
    swappable = [i for i, ch in enumerate(name.lower()) if ch in LOOK_ALIKES]
    if not swappable:
        name, swappable = name + "a", [len(name)]
    i = data.draw(st.sampled_from(swappable))
    written = name[:i] + LOOK_ALIKES[name[i].lower()] + name[i + 1 :]
    c = parse_classification(f"route: {written}\nconfidence: 0.9", [name])
    assert c.status == "unknown_route" and c.route is None


@settings(max_examples=300)
@given(route_names, st.sampled_from(["lower", "upper", "swapcase"]), st.sampled_from([" ", "-", "_", "  ", "\t"]))
def test_ascii_case_and_separators_always_match(name: str, case: str, sep: str) -> None:
    shown = getattr(name, case)().replace("-", sep).replace("_", sep)
    c = parse_classification(f"route: {shown}\nconfidence: 0.5", [name])
    assert (c.route, c.status) == (name, "ok")
    assert normalize_route_name(shown) == normalize_route_name(name)


# -- totality on adversarial structure -------------------------------------------------------


@settings(max_examples=400)
@given(
    st.lists(
        st.sampled_from(
            [
                "route",
                "confidence",
                "reason",
                ":",
                "=",
                "{",
                "}",
                '"',
                "\n",
                "\r",
                " ",
                "\t",
                "billing",
                "technical",
                "0.5",
                "1/5",
                "%",
                "e-3",
                "**",
                "`",
                "```json",
                "-",
                ",",
                "nan",
                "1e400",
                "[",
                "]",
                "\u200b",
                "\u212a",
                '{"route": "billing"}',
                '"route": ',
                '"confidence": 0.9',
                "\\",
            ]
        ),
        max_size=40,
    )
)
def test_total_and_closed_on_structured_noise(tokens: list[str]) -> None:
    text = "".join(tokens)
    c = parse_classification(text, ROUTES)
    _bounded(c)
    assert c.raw == text
    if c.status == "ok":
        assert "billing" in text or "technical" in text
