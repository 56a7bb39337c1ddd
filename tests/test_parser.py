"""The classification parser: examples and Hypothesis properties."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jeeves_router import format_classification, parse_classification, resolve_route
from jeeves_router.classify.parser import normalize_route_name
from jeeves_router.ids import ROUTE_NAME_PATTERN
from tests.strategies import route_names

ROUTES = ["billing", "tech-support", "general"]


@pytest.mark.parametrize(
    ("text", "route", "confidence"),
    [
        ("route: billing\nconfidence: 0.9", "billing", 0.9),
        ("ROUTE: Billing\nConfidence: 85%", "billing", 0.85),
        ("**Route:** Tech Support.\n**Confidence**: 0.7", "tech-support", 0.7),
        ("route = tech_support\nconfidence = 7e-1", "tech-support", 0.7),
        ("- route: `general`\n- confidence: .25", "general", 0.25),
        ('route: "billing"\nconfidence: 1', "billing", 1.0),
        ("Sure!\n\nroute: billing, it is about an invoice\nconfidence: 0.60.", "billing", 0.6),
        ("route: tech support (api errors)\nconfidence: 0.8", "tech-support", 0.8),
        ('```json\n{"route": "billing", "confidence": 0.91, "reason": "invoice"}\n```', "billing", 0.91),
        ('Here: {"Route": "General", "confidence": "40%"}', "general", 0.4),
        ("  route :   billing  \n\tconfidence :  0.5  ", "billing", 0.5),
        ("_route_: *billing*\n_confidence_: 0.3", "billing", 0.3),
    ],
)
def test_parses_tolerated_forms(text: str, route: str, confidence: float) -> None:
    c = parse_classification(text, ROUTES)
    assert c.status == "ok", c
    assert c.route == route
    assert c.confidence == pytest.approx(confidence)


@pytest.mark.parametrize(
    ("text", "status"),
    [
        ("", "empty"),
        ("   \n ", "empty"),
        ("reroute: billing\nconfidence: 0.9", "missing_route"),
        ("the route: billing", "missing_route"),
        ("route: billingx\nconfidence: 0.9", "unknown_route"),
        ("route: refunds\nconfidence: 0.9", "unknown_route"),
        ("route: billing\nroute: general\nconfidence: 0.9", "ambiguous_route"),
        ("route: billing", "missing_confidence"),
        ("route: billing\nconfidence: high", "invalid_confidence"),
        ("route: billing\nconfidence: nan", "invalid_confidence"),
        ("route: billing\nconfidence: -0.2", "invalid_confidence"),
        ("route: billing\nconfidence: 85", "invalid_confidence"),
        ("route: billing\nconfidence: inf", "invalid_confidence"),
        ('{"route": "billing", "confidence": true}', "invalid_confidence"),
    ],
)
def test_fails_closed(text: str, status: str) -> None:
    c = parse_classification(text, ROUTES)
    assert c.status == status
    assert c.confidence == 0.0
    assert c.status != "ok"
    if status in ("missing_route", "unknown_route", "ambiguous_route", "empty"):
        assert c.route is None


def test_unknown_route_keeps_what_was_asked() -> None:
    c = parse_classification("route: refunds\nconfidence: 0.9", ROUTES)
    assert c.requested == "refunds"


def test_bad_confidence_policy_is_explicit() -> None:
    c = parse_classification("route: billing\nconfidence: very high", ROUTES, on_bad_confidence=0.5)
    assert (c.route, c.confidence, c.status) == ("billing", 0.5, "ok")


def test_non_string_input_is_empty() -> None:
    assert parse_classification(None, ROUTES).status == "empty"
    assert parse_classification(42, ROUTES).status == "empty"


unit_floats = st.floats(min_value=0.0, max_value=1.0, allow_nan=False, allow_subnormal=True)


@settings(max_examples=300)
@given(st.text())
def test_total_on_any_text(text: str) -> None:
    c = parse_classification(text, ROUTES)
    assert 0.0 <= c.confidence <= 1.0
    assert not math.isnan(c.confidence)
    assert c.route is None or c.route in ROUTES
    assert c.status == "ok" or c.confidence == 0.0


@settings(max_examples=300)
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
                " ",
                "billing",
                "0.5",
                "%",
                "e-3",
                "**",
                "`",
                "```json",
                "-",
                "nan",
                "1e400",
            ]
        ),
        max_size=30,
    )
)
def test_total_on_near_miss_text(tokens: list[str]) -> None:
    c = parse_classification("".join(tokens), ROUTES)
    assert 0.0 <= c.confidence <= 1.0
    assert c.route is None or c.route in ROUTES


@settings(max_examples=300)
@given(st.lists(route_names, min_size=1, max_size=6, unique_by=normalize_route_name), st.data(), unit_floats)
def test_round_trip(names: list[str], data: st.DataObject, confidence: float) -> None:
    assert all(re.fullmatch(ROUTE_NAME_PATTERN, n) and len(n) <= 48 for n in names)
    route = data.draw(st.sampled_from(names))
    c = parse_classification(format_classification(route, confidence), names)
    assert c.status == "ok"
    assert c.route == route
    assert c.confidence == confidence


@settings(max_examples=200)
@given(
    st.sampled_from(ROUTES),
    unit_floats,
    st.sampled_from(["", "  ", "\t"]),
    st.sampled_from(["", "**", "*", "`", "_"]),
    st.sampled_from(["lower", "upper", "title"]),
    st.sampled_from([":", "=", " :", ": "]),
)
def test_tolerates_whitespace_markdown_case(route: str, conf: float, ws: str, md: str, case: str, sep: str) -> None:
    shown = {"lower": route.lower(), "upper": route.upper(), "title": route.title()}[case]
    text = f"{ws}{md}Route{md}{sep}{ws}{md}{shown}{md}{ws}\n{md}confidence{md}{sep} {conf!r}{ws}"
    c = parse_classification(text, ROUTES)
    assert (c.route, c.status) == (route, "ok")
    assert c.confidence == conf


@settings(max_examples=300)
@given(st.text(), unit_floats, unit_floats, st.sampled_from([None, "general"]))
def test_threshold_monotonic(text: str, t1: float, t2: float, fallback: str | None) -> None:
    low, high = sorted((t1, t2))
    for c in (parse_classification(text, ROUTES), parse_classification(f"route: billing\nconfidence: {t1!r}", ROUTES)):
        strict = resolve_route(c, threshold=high, fallback=fallback, routes=ROUTES)
        loose = resolve_route(c, threshold=low, fallback=fallback, routes=ROUTES)
        if strict.route is not None and not strict.used_fallback:
            assert loose.route == strict.route and not loose.used_fallback
        assert strict.route is None or strict.route in ROUTES
