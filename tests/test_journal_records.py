"""Journal records: step results keep their types through JSON; unknown types are refused."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jeeves_router.classify.types import Classification, ClassifyResult
from jeeves_router.journal.records import JournalError, digest
from jeeves_router.journal.step_results import decode_result, encode_result, register_step_type
from jeeves_router.messages import user
from jeeves_router.models.base import ModelRequest
from jeeves_router.tools import Handoff, ToolOutcome
from jeeves_router.usage import Usage

json_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8)
)
values = st.recursive(
    json_leaf | st.builds(Usage, st.integers(0, 99), st.integers(0, 99)),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=12,
)


@given(values)
def test_json_results_round_trip_with_their_types(value: object) -> None:
    tag, data = encode_result(value)
    assert decode_result(tag, data) == value


def test_library_types_round_trip() -> None:
    result = ClassifyResult(
        Classification("billing", 0.9, "ok", "route: billing"),
        Usage(3, 1, 0, 1, 0.0),
        scores=(("billing", 0.9), ("general", 0.1)),
    )
    outcome = ToolOutcome("handing off", handoff=Handoff("billing", "payments", {"n": 1}, 0.8))
    for value in (result, outcome, {"usage": Usage(1, 1), "out": [outcome]}):
        tag, data = encode_result(value)
        assert decode_result(tag, data) == value


def test_a_type_outside_the_library_must_be_registered() -> None:
    with pytest.raises(JournalError, match="not registered"):
        decode_result("os:system", {})
    with pytest.raises(JournalError, match="not registered"):
        decode_result("json", {"$type": "subprocess:Popen", "$value": {}})

    @dataclass(frozen=True)
    class Quote:
        amount: float

    register_step_type(Quote)
    tag, data = encode_result(Quote(9.5))
    assert decode_result(tag, data) == Quote(9.5)


def test_digests_ignore_fields_left_at_their_defaults() -> None:
    plain = ModelRequest(messages=(user("hi"),), system="s")
    assert digest(plain) == digest({"messages": [{"role": "user", "parts": [{"text": "hi"}]}], "system": "s"})
    assert digest(plain) != digest(ModelRequest(messages=(user("hi"),), system="s", temperature=0.0))
