"""The parser's first step for canonical replies, and the caches on the classification path.

The first step (:func:`jeeves_router.classify.parser._well_formed`, for the two-line reply
and the constrained JSON object) must be invisible: on
every reply where it answers, it answers exactly what the full path
(:func:`jeeves_router.classify.parser._read`) answers. The properties below check that on
well-formed replies (where it must answer), near misses (one detail changed) and
adversarial text, against route tables with duplicate, list-like, decorated, non-ASCII and
over-long names.
"""

from __future__ import annotations

import json
import math
import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from jeeves_router import parse_classification
from jeeves_router.classify import llm as llm_module
from jeeves_router.classify import parser
from jeeves_router.classify.llm import LLMClassifier
from jeeves_router.classify.parser import format_classification
from jeeves_router.classify.resolve import resolve_route, valid_confidence
from jeeves_router.classify.types import Classification, ClassifyRequest, RouteSpec
from jeeves_router.models.base import ModelRequest
from jeeves_router.testing import FunctionModel
from tests.strategies import route_names

TABLES: list[tuple[str, ...]] = [
    ("billing", "technical", "general", "tech-support"),
    ("Billing", "billing", "BILLING"),  # one key, the first spelling wins
    ("a, b", "a", "b"),  # a declared name that reads as a list of two others
    ("tech support", "Tech_Support", "tech  support"),
    ("billing.", "(billing)", " billing", "billing "),  # decorated names
    ("caf\u00e9", "\u0430pi", "zero\u200bwidth"),  # non-ASCII names
    ("x" * 130, "y" * 128),  # longer than the first step reads
    ("billing, because", "billing"),
    ("route", "confidence", "reason"),
    ('say "hi"', "back\\slash", "back\\nslash", "tab\there", "new\nline"),  # JSON escapes, control characters
]
tables = st.one_of(
    st.sampled_from(TABLES),
    st.lists(route_names, min_size=1, max_size=5).map(tuple),
)
numbers = st.one_of(
    st.floats(min_value=0.0, max_value=1.0, allow_nan=False).map(repr),
    st.sampled_from(["0", "1", "0.", "1.", ".5", "0.9", "1.0", "1.00", "0.99999999999999999999", "1.0000000001"]),
    st.from_regex(r"[01]?\.[0-9]{0,40}", fullmatch=True),
)
ends = st.sampled_from(["", "\n"])
spaces = st.lists(st.sampled_from(["", " "]), min_size=7, max_size=7)


def _json(name: str, number: str, end: str, sp: list[str]) -> str:
    """The object a constrained model writes, with a space or none after each token."""
    return (
        f'{{{sp[0]}"route"{sp[1]}:{sp[2]}"{name}"{sp[3]},{sp[4]}"confidence"{sp[5]}:{sp[6]}{number}'
        f"{sp[0]}}}{sp[1]}{end}"
    )


# Near misses: one detail of the canonical form changed.
_MUTATIONS = [
    lambda r, c, e: f"Route: {r}\nconfidence: {c}{e}",
    lambda r, c, e: f"route:{r}\nconfidence: {c}{e}",
    lambda r, c, e: f"route:  {r}\nconfidence: {c}{e}",
    lambda r, c, e: f"route: {r} \nconfidence: {c}{e}",
    lambda r, c, e: f"route: {r}\r\nconfidence: {c}{e}",
    lambda r, c, e: f"route: {r}\nconfidence: {c}%{e}",
    lambda r, c, e: f"route: {r}\nconfidence: -{c}{e}",
    lambda r, c, e: f"route: {r}\nconfidence: {c}e0{e}",
    lambda r, c, e: f"route: {r}\nconfidence: {c}.{e}",
    lambda r, c, e: f"route: {r}\nconfidence: 1{c}{e}",
    lambda r, c, e: f"route: {r}\nconfidence: {c}\n\n",
    lambda r, c, e: f"route: {r}\nconfidence: {c} {e}",
    lambda r, c, e: f"route: {r}.\nconfidence: {c}{e}",
    lambda r, c, e: f"route: **{r}**\nconfidence: {c}{e}",
    lambda r, c, e: f"route: {r.upper()}\nconfidence: {c}{e}",
    lambda r, c, e: f"route: {r.replace('-', '_')}\nconfidence: {c}{e}",
    lambda r, c, e: f"route: {r}, general\nconfidence: {c}{e}",
    lambda r, c, e: f" route: {r}\nconfidence: {c}{e}",
    lambda r, c, e: f"route: {r}\nconfidence: {c}\nreason: because",
    lambda r, c, e: f"route: {r}\nconfidence: {c}\nroute: other",
    lambda r, c, e: f"route: {r}\nconfidence: {c}\nconfidence: 0.1",
    lambda r, c, e: f"route: {r}\nroute: {r}\nconfidence: {c}{e}",
    lambda r, c, e: f"confidence: {c}\nroute: {r}{e}",
    lambda r, c, e: f'route: {r}\nconfidence: {c}\n{{"route": "x"}}',
    lambda r, c, e: f"route: {r}\u2028x\nconfidence: {c}{e}",
    lambda r, c, e: f'{{"Route": "{r}", "confidence": {c}}}{e}',
    lambda r, c, e: f'{{"route": "{r}", "confidence": "{c}"}}{e}',
    lambda r, c, e: f'{{"route": "{r}", "confidence": {c}, "reason": "x"}}{e}',
    lambda r, c, e: f'{{"confidence": {c}, "route": "{r}"}}{e}',
    lambda r, c, e: f'{{"route": "{r}", "confidence": {c}}} {{"route": "x"}}',
    lambda r, c, e: f'{{"route": "{r}", "confidence": {c}}}\n\n',
    lambda r, c, e: f'{{"route": "{r}", "confidence": {c}}}\nreason: because',
    lambda r, c, e: f'route: {r}\n{{"route": "{r}", "confidence": {c}}}',
    lambda r, c, e: f'{{"route":  "{r}", "confidence": {c}}}{e}',
    lambda r, c, e: f'{{"route":\t"{r}", "confidence": {c}}}{e}',
    lambda r, c, e: f'{{"route": "{r}", "confidence": -{c}}}{e}',
    lambda r, c, e: f'{{"route": "{r}", "confidence": {c}e0}}{e}',
    lambda r, c, e: f'{{"route": "{r}", "confidence": {c},}}{e}',
    lambda r, c, e: f'{{"route": "{r}", "route": "{r}", "confidence": {c}}}{e}',
    lambda r, c, e: f'{{"route": "\\u0062{r}", "confidence": {c}}}{e}',
    lambda r, c, e: f'{{"route": "{r}\t", "confidence": {c}}}{e}',
    lambda r, c, e: f'x {{"route": "{r}", "confidence": {c}}}{e}',
]
_ALPHABET = "route: confidencasb\n\r\t0123456789.,%-_ {}\"'*`#>/\\\u00e9\u0430\u200b\u2028\uff10"


def _check(reply: str, routes: tuple[str, ...], on_bad: float | None) -> Classification | None:
    """Assert the first step agrees with the full path; return what it answered."""
    index = parser._index(routes)
    first = parser._well_formed(reply, index)
    full = parser._read(reply, index, on_bad)
    public = parse_classification(reply, routes, on_bad_confidence=on_bad)
    if first is not None:
        assert repr(first) == repr(full) and first == full  # repr tells -0.0 from 0.0
        assert first.status == "ok" and 0.0 <= first.confidence <= 1.0
    assert repr(public) == repr(first if first is not None else full)
    return first


on_bad_values = st.sampled_from([None, 0.0, 0.5])


@settings(max_examples=600)
@given(tables, st.data(), numbers, ends, st.booleans(), spaces, on_bad_values)
def test_first_step_equals_full_path_on_well_formed_replies(
    routes: tuple[str, ...],
    data: st.DataObject,
    number: str,
    end: str,
    as_json: bool,
    sp: list[str],
    on_bad: float | None,
) -> None:
    name = data.draw(st.sampled_from(routes))
    reply = _json(name, number, end, sp) if as_json else f"route: {name}\nconfidence: {number}{end}"
    first = _check(reply, routes, on_bad)
    full = parser._read(reply, parser._index(routes), on_bad)
    plain = name == name.strip(" \t\f\v*_`\"'\u201c\u201d\u2018\u2019<>[]().,;:!?") and len(name) <= 128
    plain = plain and not (as_json and re.search(r'["\\\x00-\x1f]', name))
    number_form = r"[01](?:\.[0-9]{1,32})?" if as_json else r"[01](?:\.[0-9]{0,32})?|\.[0-9]{1,32}"
    decimal = re.fullmatch(number_form, number) is not None
    if full.status == "ok" and plain and decimal and float(number) <= 1.0:
        assert first is not None  # the step is taken where it should be, not only harmless


@settings(max_examples=600)
@given(tables, st.data(), numbers, ends, st.sampled_from(range(len(_MUTATIONS))), on_bad_values)
def test_first_step_equals_full_path_on_near_misses(
    routes: tuple[str, ...], data: st.DataObject, number: str, end: str, which: int, on_bad: float | None
) -> None:
    name = data.draw(st.one_of(st.sampled_from(routes), route_names))
    _check(_MUTATIONS[which](name, number, end), routes, on_bad)


@settings(max_examples=600)
@given(tables, st.text(alphabet=_ALPHABET, max_size=80), st.booleans(), on_bad_values)
@example(("billing",), "route: billing\nconfidence: 0.9\n", True, None)
def test_first_step_equals_full_path_on_adversarial_text(
    routes: tuple[str, ...], tail: str, prefixed: bool, on_bad: float | None
) -> None:
    _check(("route: " + tail) if prefixed else tail, routes, on_bad)
    _check(('{"route": "' + tail) if prefixed else tail, routes, on_bad)
    _check('{"route": "' + tail + '", "confidence": 0.5}', routes, on_bad)


@settings(max_examples=200)
@given(st.lists(route_names, min_size=1, max_size=5, unique=True).map(tuple), st.data())
def test_round_trip_takes_the_first_step(routes: tuple[str, ...], data: st.DataObject) -> None:
    name = data.draw(st.sampled_from(routes))
    confidence = data.draw(st.floats(min_value=0.0, max_value=1.0, allow_nan=False))
    for reply in (format_classification(name, confidence), json.dumps({"route": name, "confidence": confidence})):
        c = _check(reply, routes, None)
        if "e" not in repr(confidence):  # 1e-05 is read by the full path
            assert c is not None and c.route == name and c.confidence == confidence


def test_route_tables_remembered_by_identity_stay_correct() -> None:
    a = (RouteSpec("billing"), RouteSpec("technical"))
    b = ("general", "billing")
    reply = "route: technical\nconfidence: 0.9"
    for _ in range(2):  # alternate between tables; each must still be read against its own
        assert parse_classification(reply, a).route == "technical"
        assert parse_classification(reply, b).status == "unknown_route"
        assert parse_classification(reply, list(b)).status == "unknown_route"
        assert parse_classification("route: general\nconfidence: 0.9", b).route == "general"


def test_str_subclass_routes_are_not_remembered() -> None:
    class Name(str):
        pass

    routes = (Name("billing"),)
    # an equal table of plain names read first (another test, another router) must not make it remembered
    assert parse_classification("route: billing\nconfidence: 0.5", ("billing",)).route == "billing"
    assert parse_classification("route: billing\nconfidence: 0.5", routes).route == "billing"
    assert parser._last_index[0] is not routes
    assert parser._index(routes) is not parser._last_index[1]


def test_a_str_subclass_table_is_read_with_its_own_names_not_an_equal_plain_tables() -> None:
    class Shown(str):
        def __str__(self) -> str:  # what the parser reads of a route that is not a RouteSpec
            return "refunds"

    plain = ("billing",)
    assert parse_classification("route: billing\nconfidence: 0.5", plain).route == "billing"
    own = (Shown("billing"),)
    assert parse_classification("route: refunds\nconfidence: 0.5", own).route == "refunds"


@given(st.floats(allow_nan=True, allow_infinity=True))
def test_valid_confidence_for_floats(x: float) -> None:
    assert valid_confidence(x) is (math.isfinite(x) and 0.0 <= x <= 1.0)


@pytest.mark.parametrize("value", [True, False, None, "0.5", 1, 0, 2, -1])
def test_valid_confidence_for_other_values(value: object) -> None:
    assert valid_confidence(value) is (type(value) is int and 0 <= value <= 1)  # type: ignore[operator]


def test_direct_decisions_are_shared_and_fallbacks_are_not_cached() -> None:
    routes = {"billing": 1, "general": 2}
    ok = Classification("billing", 0.9, "ok", "r")
    first = resolve_route(ok, threshold=0.5, fallback="general", routes=routes)
    again = resolve_route(ok, threshold=0.5, fallback="general", routes=routes)
    assert first is again and (first.route, first.used_fallback, first.reason) == ("billing", False, None)
    low = resolve_route(Classification("billing", 0.1, "ok", "r"), threshold=0.5, fallback="general", routes=routes)
    assert (low.route, low.used_fallback, low.reason) == ("general", True, "low_confidence")


def test_str_subclass_route_is_returned_as_given() -> None:
    class Name(str):
        pass

    route = Name("billing")
    d = resolve_route(Classification(route, 0.9, "ok", "r"), threshold=0.5, fallback=None, routes={"billing"})
    assert d.route is route


@pytest.mark.anyio
async def test_classifier_builds_the_prompt_once_per_route_table(monkeypatch: pytest.MonkeyPatch) -> None:
    rendered: list[int] = []
    real = llm_module.render_prompt

    def counting(template: str, routes: tuple[RouteSpec, ...]) -> str:
        rendered.append(len(routes))
        return real(template, routes)

    monkeypatch.setattr(llm_module, "render_prompt", counting)
    seen: list[ModelRequest] = []

    def reply(request: ModelRequest) -> str:
        seen.append(request)
        return "route: billing\nconfidence: 0.8"

    routes = (RouteSpec("billing", "money"), RouteSpec("general"))
    clf = LLMClassifier(FunctionModel(reply))
    for text in ("a", "b", "c"):
        result = await clf.classify(ClassifyRequest(text, routes))
        assert result.classification.route == "billing"
    equal_copy = tuple(RouteSpec(r.name, r.description) for r in routes)
    await clf.classify(ClassifyRequest("d", equal_copy))  # equal routes: the cached text
    other = routes[:1]
    await clf.classify(ClassifyRequest("e", other))
    await clf.classify(ClassifyRequest("f", routes))
    assert rendered == [2, 1]
    assert seen[0].system is seen[1].system is seen[3].system is seen[5].system
    assert seen[4].system is not None and "general" not in seen[4].system
    assert [m.messages[-1].text for m in seen] == ["a", "b", "c", "d", "e", "f"]
