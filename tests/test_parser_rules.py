"""The parser's rules by example: strict confidence, one precedence, ambiguity (issue 15)."""

from __future__ import annotations

import pytest

from jeeves_router import parse_classification

ROUTES = ["billing", "technical", "general", "admin"]


# -- the snippets -------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seen"),
    [
        ("route: billing\nconfidence: 1/5", "'1/5' is a fraction"),
        ("route: billing\nconfidence: 1 out of 10", "'1 out of 10' is 'x out of y'"),
    ],
)
def test_snippet_fraction_and_out_of_fail_closed(text: str, seen: str) -> None:
    c = parse_classification(text, ["billing"])
    assert (c.status, c.confidence) == ("invalid_confidence", 0.0)
    assert c.reason is not None and seen in c.reason


def test_snippet_json_followed_by_prose_with_braces() -> None:
    text = '{"route": "technical", "confidence": 0.9}\nNote: not {billing}.'
    c = parse_classification(text, ROUTES)
    assert (c.route, c.confidence, c.status) == ("technical", 0.9, "ok")


def test_snippet_json_inside_a_value_is_not_read() -> None:
    text = 'route: billing\nconfidence: 0.9\nreason: user pasted {"route": "x"}'
    c = parse_classification(text, ROUTES)
    assert (c.route, c.confidence, c.status) == ("billing", 0.9, "ok")
    assert c.reason == 'user pasted {"route": "x"}'


@pytest.mark.parametrize("routes", [["billing"], ROUTES], ids=["admin-undeclared", "admin-declared"])
@pytest.mark.parametrize(
    "text",
    [
        "route: billing\nroute: admin",
        "route: admin\nroute: billing",
        "route: billing\nroute: admin\nconfidence: 0.9",
        "route: admin\nconfidence: 0.9\nroute: billing",
    ],
)
def test_snippet_two_routes_are_ambiguous_in_any_order(text: str, routes: list[str]) -> None:
    c = parse_classification(text, routes)
    assert (c.route, c.confidence, c.status) == (None, 0.0, "ambiguous_route")
    assert c.reason is not None and "'billing'" in c.reason and "'admin'" in c.reason


# -- item 2: one unambiguous number -----------------------------------------------------


@pytest.mark.parametrize(
    ("value", "confidence"),
    [
        ("0.9", 0.9),
        (".25", 0.25),
        ("1", 1.0),
        ("0", 0.0),
        ("-0", 0.0),
        ("+0.5", 0.5),
        ("7e-1", 0.7),
        ("1E-2", 0.01),
        ("85%", 0.85),
        ("85 %", 0.85),
        ("100%", 1.0),
        ("**0.75**", 0.75),
        ("`0.75`", 0.75),
        ('"0.75"', 0.75),
        ("(0.75)", 0.75),
        ("0.75.", 0.75),
    ],
)
def test_one_number_is_read(value: str, confidence: float) -> None:
    c = parse_classification(f"route: billing\nconfidence: {value}", ROUTES)
    assert (c.status, c.route) == ("ok", "billing")
    assert c.confidence == pytest.approx(confidence)


@pytest.mark.parametrize(
    ("value", "seen"),
    [
        ("1/5", "is a fraction"),
        ("4 / 5", "is a fraction"),
        ("0.7-0.9", "is a range"),
        ("0.7 - 0.9", "is a range"),
        ("0.7 to 0.9", "is a range"),
        ("0.7\u20130.9", "is a range"),
        ("1 out of 10", "'x out of y'"),
        ("8 out of 10", "'x out of y'"),
        ("high", "is not a number"),
        ("very likely", "is not a number"),
        ("0.9 0.8", "has several numbers"),
        ("0.9, maybe 0.8", "has several numbers"),
        ("0,9", "has several numbers"),
        ("0.9 (high)", "has words besides the number"),
        ("about 0.9", "has words besides the number"),
        ("nan", "is not a finite number"),
        ("inf", "is not a finite number"),
        ("-Infinity", "is not a finite number"),
        ("1e400", "is not a finite number"),
        ("-0.2", "is outside [0, 1]"),
        ("85", "is outside [0, 1]"),
        ("150%", "is outside [0, 1]"),
        ("\uff10.\uff19", "is not a number"),  # fullwidth digits
        ("\u0660.\u0669", "is not a number"),  # Arabic-Indic digits
        ("0." + "9" * 70, "characters long"),
        ("", "is empty"),
    ],
)
def test_anything_else_fails_closed_and_names_what_was_seen(value: str, seen: str) -> None:
    c = parse_classification(f"route: billing\nconfidence: {value}", ROUTES)
    assert (c.status, c.confidence, c.route) == ("invalid_confidence", 0.0, "billing")
    assert c.reason is not None and seen in c.reason, c.reason


@pytest.mark.parametrize(
    ("value", "seen"),
    [
        ("true", "true is not a number"),
        ("null", "null is not a number"),
        ("[0.9]", "a JSON list"),
        ('{"p": 0.9}', "a JSON object"),
        ('"1/5"', "is a fraction"),
        ("1.5", "outside [0, 1]"),
        ("NaN", "not a finite number"),
        ("1e999", "not a finite number"),
        # int() refuses 5000 digits on Pythons with a digit limit: then no object is read
        ("1" + "0" * 5000, "outside [0, 1]"),
    ],
)
def test_json_confidence_fails_closed(value: str, seen: str) -> None:
    c = parse_classification(f'{{"route": "billing", "confidence": {value}}}', ROUTES)
    assert c.status != "ok" and c.confidence == 0.0
    if c.status == "invalid_confidence":
        assert c.reason is not None and seen in c.reason, c.reason
    else:
        assert c.status == "missing_route" and len(value) > 4300


def test_two_different_confidences_fail_closed() -> None:
    c = parse_classification("route: billing\nconfidence: 0.9\nconfidence: 0.3", ROUTES)
    assert (c.status, c.confidence) == ("invalid_confidence", 0.0)
    assert c.reason == "two different confidences: 0.9 and 0.3"
    same = parse_classification("route: billing\nconfidence: 0.9\nconfidence: 90%", ROUTES)
    assert (same.status, same.confidence) == ("ok", 0.9)


def test_one_bad_confidence_among_good_ones_fails_closed() -> None:
    c = parse_classification("route: billing\nconfidence: high\nconfidence: 0.8", ROUTES)
    assert c.status == "invalid_confidence"


# -- item 3: one precedence ---------------------------------------------------------------


def test_key_lines_win_over_a_json_object() -> None:
    text = 'route: billing\nconfidence: 0.8\n```json\n{"route": "technical", "confidence": 0.9}\n```'
    c = parse_classification(text, ROUTES)
    assert (c.route, c.confidence, c.status) == ("billing", 0.8, "ok")


@pytest.mark.parametrize(
    "text",
    [
        '{"route": "technical", "confidence": 0.9}',
        '```json\n{"route": "technical", "confidence": 0.9}\n```',
        '```\n{\n  "route": "technical",\n  "confidence": 0.9\n}\n```\nThat is my answer {really}.',
        'Here you go: {"route": "technical", "confidence": 0.9} -- hope it helps',
        '{"route": "technical", "confidence": 0.9, "alternatives": [{"route": "billing"}]}',
        '{"route": "technical", "details": {"route": "billing"}, "confidence": 0.9}',
        '{"Route": "Technical", "CONFIDENCE": "90%"}',
        'Braces first {not json} and {"also": "no route"}, then {"route": "technical", "confidence": 0.9}',
    ],
)
def test_json_object_bare_fenced_or_with_prose(text: str) -> None:
    c = parse_classification(text, ROUTES)
    assert (c.route, c.confidence, c.status) == ("technical", 0.9, "ok")


@pytest.mark.parametrize(
    "text",
    [
        'reason: see {"route": "technical", "confidence": 0.9}',
        'confidence: 0.9 {"route": "technical"}',
    ],
)
def test_json_inside_a_key_value_is_never_read(text: str) -> None:
    c = parse_classification(text, ROUTES)
    assert (c.status, c.route) == ("missing_route", None)


@pytest.mark.parametrize(
    "text",
    [
        '{"route": "technical", "confidence": 0.9} {"route": "billing", "confidence": 0.9}',
        '{"route": "technical", "route": "billing", "confidence": 0.9}',
        '{"route": "technical", "Route": "billing", "confidence": 0.9}',
        "route: technical, billing\nconfidence: 0.9",
        "route: technical / billing\nconfidence: 0.9",
        "route: refunds\nroute: billing\nconfidence: 0.9",
    ],
)
def test_two_routes_in_one_source_are_ambiguous(text: str) -> None:
    c = parse_classification(text, ROUTES)
    assert (c.status, c.route, c.confidence) == ("ambiguous_route", None, 0.0)


def test_repeating_the_same_route_is_not_ambiguous() -> None:
    text = "route: billing\nRoute: **Billing**.\nconfidence: 0.9"
    assert parse_classification(text, ROUTES).status == "ok"
    both = '{"route": "billing", "confidence": 0.9}\n{"route": "billing", "confidence": 0.9}'
    assert parse_classification(both, ROUTES).status == "ok"


def test_a_name_followed_by_prose_mentioning_another_route_is_not_a_list() -> None:
    c = parse_classification("route: billing, because it is not technical\nconfidence: 0.9", ROUTES)
    assert (c.route, c.status) == ("billing", "ok")


@pytest.mark.parametrize(
    "text",
    [
        '"route": "billing",\n"confidence": 0.9',  # quoted keys are JSON syntax, not key lines
        "the route: billing\nconfidence: 0.9",
        "42route: billing\nconfidence: 0.9",
        "routes: billing\nconfidence: 0.9",
    ],
)
def test_not_key_lines(text: str) -> None:
    assert parse_classification(text, ROUTES).status == "missing_route"


def test_carriage_returns_end_lines() -> None:
    for nl in ("\r\n", "\r"):
        c = parse_classification(f"route: billing{nl}confidence: 0.9{nl}", ROUTES)
        assert (c.route, c.confidence, c.status) == ("billing", 0.9, "ok")


def test_too_many_key_lines_or_json_objects_fail_closed() -> None:
    many_lines = "route: billing\n" * 100 + "confidence: 0.9"
    c = parse_classification(many_lines, ROUTES)
    assert c.status == "missing_route" and c.reason is not None and "key lines" in c.reason
    many_objects = '{"a": 1} ' * 100 + '{"route": "billing", "confidence": 0.9}'
    c = parse_classification(many_objects, ROUTES)
    assert c.status == "missing_route" and c.reason is not None and "JSON objects" in c.reason
    deep = '{"a": ' * 100_000 + '{"route": "billing", "confidence": 0.9}'
    c = parse_classification(deep, ROUTES)
    assert c.status == "missing_route" and c.reason is not None and "nested too deeply" in c.reason


# -- route names: no Unicode normalisation ------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        "bill\u200bing",  # zero-width space
        "bill\u200ding",  # zero-width joiner
        "\ufeffbilling",  # byte order mark
        "billing\u2060",  # word joiner
        "bill\u00ading",  # soft hyphen
        "b\u0456lling",  # Cyrillic i
        "\uff42illing",  # fullwidth b
        "\u212adm",  # Kelvin sign, lower-cases to "k"
        "tech\u00a0support",  # no-break space is not a separator
    ],
)
def test_look_alikes_and_invisible_characters_never_match(name: str) -> None:
    c = parse_classification(f"route: {name}\nconfidence: 0.9", [*ROUTES, "tech-support", "kdm"])
    assert (c.status, c.route) == ("unknown_route", None)
    assert c.requested == name
    assert c.reason is not None and "non-ASCII" in c.reason


def test_ascii_case_and_separators_are_folded() -> None:
    c = parse_classification("route: Tech__SUPPORT\nconfidence: 0.9", ["tech-support"])
    assert (c.route, c.status) == ("tech-support", "ok")
