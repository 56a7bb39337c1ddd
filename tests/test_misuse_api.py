"""Misuse of the classifiers, the parser, evaluation and risk control: each is an error naming the fix."""

from __future__ import annotations

from typing import Any

import pytest

from jeeves_router import Agent, Router, RouterRoute, UsageError
from jeeves_router.classify import Classification, ClassifyRequest, ClassifyResult
from jeeves_router.testing import ScriptedModel, StaticClassifier


def _desk(classifier: object, fallback: str | None = "general") -> Agent:
    routes = [
        RouterRoute("billing", Agent("p", name="billing", model=ScriptedModel(["B"])), "payments"),
        RouterRoute("general", Agent("p", name="general", model=ScriptedModel(["G"])), "anything else"),
    ]
    router = Router(routes=routes, fallback_route=fallback, classifier=classifier)  # type: ignore[arg-type]
    return Agent("desk", name="desk", model=ScriptedModel([]), architecture=router)


class _Returns:
    def __init__(self, value: object) -> None:
        self.value = value

    async def classify(self, request: ClassifyRequest) -> Any:
        return self.value


@pytest.mark.parametrize(
    ("value", "match"),
    [
        ("billing", r"_Returns\.classify returned str, not a ClassifyResult; return one"),
        (
            Classification("billing", 0.9, "ok", "x"),
            r"returned Classification, not a ClassifyResult; wrap it: ClassifyResult\(classification\)",
        ),
        (None, r"_Returns\.classify returned NoneType, not a ClassifyResult"),
    ],
)
def test_a_classifier_returning_something_else_than_a_classify_result_is_named_and_nothing_is_dispatched(
    value: object, match: str
) -> None:
    with pytest.raises(UsageError, match=match):
        _desk(_Returns(value)).run_sync("I was charged twice")


def test_a_cascade_stage_returning_something_else_than_a_classify_result_is_named() -> None:
    from jeeves_router.classify.cascade import CascadeClassifier

    cascade = CascadeClassifier(_Returns("billing"), StaticClassifier("billing"))
    with pytest.raises(UsageError, match=r"_Returns\.classify returned str, not a ClassifyResult"):
        _desk(cascade).run_sync("hi")


class _SyncClassify:
    def classify(self, request: ClassifyRequest) -> ClassifyResult:
        return ClassifyResult(Classification("billing", 0.9, "ok", "x"))


def test_a_classifier_with_a_sync_classify_is_refused_at_construction() -> None:
    from jeeves_router.classify.cascade import CascadeClassifier

    with pytest.raises(UsageError, match=r"classifier _SyncClassify\.classify is not a coroutine function: declare it"):
        _desk(_SyncClassify())
    with pytest.raises(UsageError, match=r"the second stage _SyncClassify\.classify is not a coroutine function"):
        CascadeClassifier(StaticClassifier("billing"), _SyncClassify())  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"route": 3}, r"StaticClassifier: route must be a route name \(a string\) or None, got 3"),
        ({"rules": ["refund"]}, r"StaticClassifier: rules must map substrings to route names .*got \['refund'\]"),
        ({"rules": {"refund": 1}}, r"StaticClassifier: rules must map substrings to route names"),
    ],
)
def test_static_classifier_arguments_of_the_wrong_type_are_named(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(UsageError, match=match):
        StaticClassifier(**kwargs)


@pytest.mark.parametrize("confidence", [float("nan"), 2.0, -1.0, "0.9"])
def test_static_classifier_reports_a_bad_confidence_as_given_and_the_router_fails_closed(confidence: Any) -> None:
    result = _desk(StaticClassifier("billing", confidence)).run_sync("hi")
    assert (result.route, result.output, result.used_fallback) == ("general", "G", True)
    assert _desk(StaticClassifier("billing", confidence), fallback=None).run_sync("hi").route is None


def _embedding() -> Any:
    from jeeves_router.classify import RouteSpec
    from jeeves_router.classify.embedding import EmbeddingClassifier
    from jeeves_router.classify.embedding.static import HashingEncoder

    routes = [RouteSpec("billing", "payments", ("refund my card",)), RouteSpec("tech", "bugs", ("app crashes",))]
    return EmbeddingClassifier(routes, encoder=HashingEncoder(), scorer="centroid")


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda c: c.classify_batch("refund"), r"texts must be a list of strings, got 'refund': e\.g\."),
        (lambda c: c.classify_batch(["refund", None]), r"classify_batch: texts must be a list of strings"),
        (lambda c: c.classify_batch(["refund"], routes="billing"), r"routes must be a list of route names or None"),
        (lambda c: c.classify_text(None), r"classify_text: text must be a string, got None"),
        (lambda c: c.classify_text("refund", "billing"), r"classify_text: routes must be a list of route names"),
    ],
)
def test_embedding_classify_text_and_batch_refuse_a_string_in_a_list_s_place(call: Any, match: str) -> None:
    classifier = _embedding()
    with pytest.raises(UsageError, match=match):
        call(classifier)
    assert classifier.classify_batch(["refund my card"], routes=["billing"])[0].classification.route == "billing"


def test_embedding_threshold_that_is_no_number_is_a_usage_error() -> None:
    classifier = _embedding()
    with pytest.raises(UsageError, match=r"threshold must be within \[0, 1\] or None, got '0\.5'"):
        classifier.threshold = "0.5"
    assert classifier.threshold is None


@pytest.mark.parametrize(
    ("routes", "match"),
    [
        ("billing", r"parse_classification: routes must be a list of route names, got 'billing': e\.g\. \['billing'\]"),
        (None, r"routes must be a list of route names, got None"),
    ],
)
def test_parse_classification_refuses_routes_given_as_one_string(routes: Any, match: str) -> None:
    from jeeves_router.classify import parse_classification

    with pytest.raises(UsageError, match=match):  # "billing" declared the routes b, i, l, n, g
        parse_classification("route: b\nconfidence: 0.9", routes)
    assert parse_classification("route: b\nconfidence: 0.9", ["billing"]).status == "unknown_route"


@pytest.mark.parametrize("value", [2, -1, float("nan"), "0.5", True])
def test_parse_classification_refuses_an_on_bad_confidence_it_would_ignore(value: Any) -> None:
    from jeeves_router.classify import parse_classification

    with pytest.raises(UsageError, match=r"on_bad_confidence must be None or a number in \[0, 1\], got "):
        parse_classification("route: billing", ["billing"], on_bad_confidence=value)
    accepted = parse_classification("route: billing", ["billing"], on_bad_confidence=0.5)
    assert (accepted.status, accepted.confidence) == ("ok", 0.5)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_format_retries": "1"}, r"max_format_retries must be an integer >= 0, got '1'"),
        ({"max_tokens": 0}, r"max_tokens must be an integer >= 1, got 0"),
        ({"max_tokens": "64"}, r"max_tokens must be an integer >= 1, got '64'"),
        ({"on_bad_confidence": "0.5"}, r"on_bad_confidence \(or None\) must be a number within \[0, 1\], got '0\.5'"),
        ({"few_shot": 1.5}, r"few_shot \(examples per route\) must be an integer >= 0, got 1\.5"),
        ({"few_shot_confidence": "0.9"}, r"few_shot_confidence must be a number within \[0, 1\], got '0\.9'"),
        ({"restrict_to_hints": "yes"}, r"restrict_to_hints must be True or False, got 'yes'"),
    ],
)
def test_llm_classifier_options_of_the_wrong_type_are_named(kwargs: dict[str, Any], match: str) -> None:
    from jeeves_router.classify import LLMClassifier

    with pytest.raises(UsageError, match=match):
        LLMClassifier(ScriptedModel([]), **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_format_retries": "1"}, r"max_format_retries must be an integer >= 0, got '1'"),
        ({"max_tokens": -5}, r"max_tokens must be an integer >= 1, got -5"),
        ({"on_missing_confidence": "0.5"}, r"on_missing_confidence \(or None\) must be a number within \[0, 1\]"),
        ({"on_missing_confidence": float("nan")}, r"on_missing_confidence \(or None\) must be a number within"),
        ({"instructions": ["be brief"]}, r"instructions must be a string or None, got list"),
    ],
)
def test_toolcall_classifier_options_of_the_wrong_type_are_named(kwargs: dict[str, Any], match: str) -> None:
    from jeeves_router.classify import ToolCallClassifier

    with pytest.raises(UsageError, match=match):
        ToolCallClassifier(ScriptedModel([]), **kwargs)


def _rows() -> list[Any]:
    from jeeves_router.eval import LabelledRow

    return [LabelledRow("refund please", "billing", 1), LabelledRow("app crash", "general", 2)]


def _specs() -> list[Any]:
    from jeeves_router.classify import RouteSpec

    return [RouteSpec("billing", "payments"), RouteSpec("general", "anything else")]


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        ((None, "billing", None), {}, r"evaluate routes must be a list, got 'billing'"),
        ((None, [], None), {}, r"evaluate needs at least one route"),
        ((None, None, [("refund", "billing", 1)]), {}, r"rows must be a list of LabelledRow\(text, label, line\)"),
        ((None, None, None), {"concurrency": "4"}, r"concurrency must be an integer >= 1, got '4'"),
        ((_SyncClassify(), None, None), {}, r"classifier _SyncClassify\.classify is not a coroutine function"),
        ((_Returns("billing"), None, None), {}, r"line 1 .*_Returns\.classify returned str, not a ClassifyResult"),
    ],
)
def test_evaluate_names_a_wrong_argument_or_classifier_result(
    args: tuple[Any, ...], kwargs: dict[str, Any], match: str
) -> None:
    import anyio

    from jeeves_router.eval import EvaluationError, evaluate

    classifier, routes, rows = args
    classifier = StaticClassifier("billing") if classifier is None else classifier
    routes = _specs() if routes is None else routes
    rows = _rows() if rows is None else rows
    with pytest.raises(EvaluationError if isinstance(classifier, _Returns) else UsageError, match=match):
        anyio.run(lambda: evaluate(classifier, routes, rows, **kwargs))
    report = anyio.run(lambda: evaluate(StaticClassifier("billing"), _specs(), _rows()))
    assert report.accuracy == 0.5


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"correct": ["no"] * 30}, r"correct must be True/False flags, one per score, got \['no'"),
        ({"max_misroute": "0.1"}, r"max_misroute must be within \(0, 1\), got '0\.1'"),
        ({"confidence": float("nan")}, r"confidence must be within \(0, 1\), got nan"),
        ({"oos_share": "0.2", "in_scope": [True] * 30}, r"oos_share must be within \[0, 1\), got '0\.2'"),
        ({"oos_share": 0.2, "in_scope": ["yes"] * 30}, r"in_scope must be True/False flags"),
    ],
)
def test_choose_risk_threshold_refuses_flags_that_are_no_booleans_and_bounds_that_are_no_numbers(
    kwargs: dict[str, Any], match: str
) -> None:
    from jeeves_router.classify.risk import choose_risk_threshold

    args: dict[str, Any] = {"correct": [True, False] * 15, "max_misroute": 0.1} | kwargs
    with pytest.raises(UsageError, match=match):  # "no" read as a correct route: a cap certified on nothing
        choose_risk_threshold([i / 30 for i in range(30)], **args)
    assert choose_risk_threshold([i / 30 for i in range(30)], [True, False] * 15, max_misroute=0.1).rows == 30


def test_embedding_load_names_a_directory_or_a_file_that_is_not_utf8(tmp_path: Any) -> None:
    from jeeves_router.classify.embedding import EmbeddingClassifier

    with pytest.raises(UsageError, match=r": cannot read the file \(Is a directory\)"):
        EmbeddingClassifier.load(tmp_path)
    latin = tmp_path / "c.json"
    latin.write_bytes(b'{"format": "caf\xe9"}')
    with pytest.raises(UsageError, match=r"c\.json: not UTF-8 text \(a byte at offset 15\)"):
        EmbeddingClassifier.load(latin)
    with pytest.raises(UsageError, match=r"missing\.json: file not found"):
        EmbeddingClassifier.load(tmp_path / "missing.json")


@pytest.mark.parametrize(
    ("texts", "labels", "match"),
    [
        ("ab", "cd", r"fit: texts must be a list of strings, got 'ab'"),  # was 'unknown route labels ['c', 'd']'
        (["refund", "crash"], "billing", r"fit: labels must be a list of route names, one per text, got 'billing'"),
        (["refund", "crash"], None, r"fit: labels must be a list of route names, one per text"),
    ],
)
def test_embedding_fit_refuses_a_string_in_a_list_s_place(texts: Any, labels: Any, match: str) -> None:
    with pytest.raises(UsageError, match=match):
        _embedding().fit(texts, labels)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_hints": "3"}, r"max_hints must be an integer >= 0, got '3'"),
        ({"max_hints": True}, r"max_hints must be an integer >= 0, got True"),
        ({"first_stage_name": 3}, r"CascadeClassifier: first_stage_name must be a non-empty string, got 3"),
        ({"second_stage_name": ""}, r"CascadeClassifier: second_stage_name must be a non-empty string, got ''"),
    ],
)
def test_cascade_options_of_the_wrong_type_are_named(kwargs: dict[str, Any], match: str) -> None:
    from jeeves_router.classify.cascade import CascadeClassifier

    with pytest.raises(UsageError, match=match):
        CascadeClassifier(StaticClassifier("billing"), StaticClassifier("billing"), **kwargs)
