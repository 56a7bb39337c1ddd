"""The article before a type name in a message: "an EmbeddingClassifier", "a str"."""

from __future__ import annotations

import pytest

from jeeves_router._articles import a_type, with_article
from jeeves_router.classify.confidence import read_confidence
from jeeves_router.errors import UsageError
from jeeves_router.serve import served_agents


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("EmbeddingClassifier", "an EmbeddingClassifier"),
        ("int", "an int"),
        ("object", "an object"),
        ("Agent", "an Agent"),
        ("str", "a str"),
        ("NoneType", "a NoneType"),
        ("UsageError", "a UsageError"),
        ("UUID", "a UUID"),
        ("UnboundLocalError", "an UnboundLocalError"),
        ("_Environ", "a _Environ"),
    ],
)
def test_with_article(name: str, said: str) -> None:
    assert with_article(name) == said


def test_a_type_names_the_type_of_a_value() -> None:
    assert a_type(3) == "an int"
    assert a_type([]) == "a list"


def test_a_confidence_of_another_type_is_named_with_the_right_article() -> None:
    assert read_confidence(object()) == (None, "confidence is an object, not a number")
    assert read_confidence([0.5]) == (None, "confidence is a list, not a number")


def test_a_served_model_of_another_type_is_named_with_the_right_article() -> None:
    with pytest.raises(UsageError, match=r"serve an Agent, a list or a mapping of agents, not an int$"):
        served_agents(7)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"served model 'desk' must be an Agent, not an object$"):
        served_agents({"desk": object()})  # type: ignore[dict-item]
