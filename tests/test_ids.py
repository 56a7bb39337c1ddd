"""child_session_id is deterministic and collision-free."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jeeves_router import UsageError, child_session_id, split_child_session_id
from jeeves_router.ids import validate_route_name
from tests.strategies import route_names as routes

parents = st.text(min_size=1, alphabet=st.sampled_from("abxyz_-r0uote")) | st.text(min_size=1)


def test_documented_form() -> None:
    assert child_session_id("s-42", "billing") == "s-42__route_billing"


@settings(max_examples=500)
@given(parents, routes, parents, routes)
def test_injective(p1: str, r1: str, p2: str, r2: str) -> None:
    if (p1, r1) != (p2, r2):
        assert child_session_id(p1, r1) != child_session_id(p2, r2)


@settings(max_examples=500)
@given(parents, routes)
def test_split_inverts(parent: str, route: str) -> None:
    assert split_child_session_id(child_session_id(parent, route)) == (parent, route)


@settings(max_examples=300)
@given(routes)
def test_generated_names_are_valid(route: str) -> None:
    assert validate_route_name(route) == route and len(route) <= 48


def test_classic_collision_is_impossible() -> None:
    assert child_session_id("x__route_y", "z") == "x__route_y__route_z"
    with pytest.raises(UsageError):
        child_session_id("x", "y__route_z")


@pytest.mark.parametrize("bad", ["", "a__b", "-a", "a-", "a b", "a.b", "x" * 49, "é"])
def test_bad_route_names(bad: str) -> None:
    with pytest.raises(UsageError, match="route name"):
        child_session_id("s", bad)
