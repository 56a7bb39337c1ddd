"""The recovery vocabulary and the pure ladder: severities, classification, decisions, reports."""

from __future__ import annotations

import json

import anyio
import pytest
from pydantic import BaseModel, ValidationError

from jeeves_router.errors import ModelError, RunError, ScriptExhausted, StreamInterrupted, UsageError
from jeeves_router.policies import DEFAULT_RETRY, FRAMEWORK_RETRY, RetryPolicy
from jeeves_router.recovery import (
    Action,
    Counters,
    ErrorClassification,
    ErrorContext,
    ErrorSeverity,
    ExecutionError,
    Limits,
    Recovery,
    StepRecord,
    budget_exceeded,
    build_report,
    classify_failure,
    default_classification,
    explain_report,
    next_action,
)
from jeeves_router.recovery.classify import mark_fatal
from jeeves_router.testing import FunctionModel, ScriptedModel

CTX = ErrorContext("step")


def test_severity_values_match_run_error_strings() -> None:
    assert [s.name for s in ErrorSeverity] == ["RETRIABLE", "REPLANNING", "RECLASSIFICATION", "CRITICAL", "FATAL"]
    for s in ErrorSeverity:
        assert ErrorSeverity(RunError("x", severity=s.value).severity) is s


def test_execution_error_is_a_run_error_with_severity() -> None:
    err = ExecutionError(ErrorSeverity.REPLANNING, "no rows", capability_name="sql", metadata={"table": "t"})
    assert isinstance(err, RunError)
    assert err.severity == "replanning" and err.capability_name == "sql" and err.metadata == {"table": "t"}
    assert ExecutionError("fatal", "x").error_severity is ErrorSeverity.FATAL
    with pytest.raises(UsageError, match="unknown severity"):
        ExecutionError("bad", "x")


def test_format_for_llm_is_deterministic() -> None:
    c = ErrorClassification(ErrorSeverity.RECLASSIFICATION, "wrong desk", {"b": 2, "a": 1})
    assert c.format_for_llm() == (
        "Previous attempt failed (severity: reclassification).\nReason: wrong desk\na: 1\nb: 2"
    )
    assert ErrorClassification("retriable").severity is ErrorSeverity.RETRIABLE


class _Model(BaseModel):
    n: int


def _validation_error() -> ValidationError:
    try:
        _Model(n="x")  # type: ignore[arg-type]
    except ValidationError as exc:
        return exc
    raise AssertionError("unreachable")


@pytest.mark.parametrize(
    ("exc", "severity"),
    [
        (TimeoutError(), ErrorSeverity.RETRIABLE),
        (ConnectionResetError(), ErrorSeverity.RETRIABLE),
        (OSError("disk"), ErrorSeverity.RETRIABLE),
        (type("ConnectError", (Exception,), {})(), ErrorSeverity.RETRIABLE),
        (ModelError("429", severity="retriable"), ErrorSeverity.RETRIABLE),
        (ModelError("400", severity="critical"), ErrorSeverity.CRITICAL),
        (StreamInterrupted("cut"), ErrorSeverity.CRITICAL),
        (ScriptExhausted("done"), ErrorSeverity.FATAL),
        (UsageError("misuse"), ErrorSeverity.FATAL),
        (ValueError("v"), ErrorSeverity.CRITICAL),
        (TypeError("t"), ErrorSeverity.CRITICAL),
        (_validation_error(), ErrorSeverity.CRITICAL),
        (RuntimeError("?"), ErrorSeverity.CRITICAL),
        (RunError("odd", severity="weird"), ErrorSeverity.CRITICAL),
    ],
)
def test_default_classification_by_type(exc: BaseException, severity: ErrorSeverity) -> None:
    assert default_classification(exc).severity is severity


def test_hooks_first_answer_wins_none_falls_through() -> None:
    seen: list[str] = []

    def none_hook(exc: BaseException, ctx: ErrorContext) -> ErrorClassification | None:
        seen.append("none")
        return None

    def replan(exc: BaseException, ctx: ErrorContext) -> ErrorClassification | None:
        seen.append(ctx.operation)
        return ErrorClassification(ErrorSeverity.REPLANNING)

    assert classify_failure(ValueError(), CTX, (None, none_hook, replan)).severity is ErrorSeverity.REPLANNING
    assert seen == ["none", "step"]
    assert classify_failure(TimeoutError(), CTX, (none_hook,)).severity is ErrorSeverity.RETRIABLE


def test_raising_hook_is_critical_and_keeps_both_exceptions() -> None:
    original = TimeoutError("slow")

    def broken(exc: BaseException, ctx: ErrorContext) -> ErrorClassification | None:
        raise KeyError("oops")

    c = classify_failure(original, CTX, (broken,))
    assert c.severity is ErrorSeverity.CRITICAL
    assert isinstance(c.hook_error, KeyError)
    assert c.hook_error.__context__ is original
    bad = classify_failure(original, CTX, (lambda e, c: "retriable",))  # type: ignore[arg-type,return-value]
    assert bad.severity is ErrorSeverity.CRITICAL and isinstance(bad.hook_error, TypeError)


def test_fatal_mark_cannot_be_softened_by_a_hook() -> None:
    exc = RuntimeError("x")
    mark_fatal(exc)
    soft = ErrorClassification(ErrorSeverity.RETRIABLE)
    assert classify_failure(exc, CTX, (lambda e, c: soft,)).severity is ErrorSeverity.FATAL


def _decide(severity: ErrorSeverity, **kw: object) -> object:
    args: dict[str, object] = {"attempt": 1, "policy": DEFAULT_RETRY, "counters": Counters(), "limits": Limits()}
    args.update(kw)
    return next_action(severity, **args)  # type: ignore[arg-type]


def test_retriable_backs_off_per_policy_then_stops() -> None:
    d1 = _decide(ErrorSeverity.RETRIABLE, attempt=1)
    d2 = _decide(ErrorSeverity.RETRIABLE, attempt=2)
    d3 = _decide(ErrorSeverity.RETRIABLE, attempt=3)
    assert (d1.action, d1.delay_s) == (Action.RETRY, 0.5)  # type: ignore[attr-defined]
    assert (d2.action, d2.delay_s) == (Action.RETRY, 0.75)  # type: ignore[attr-defined]
    assert (d3.action, d3.reason) == (Action.STOP, "retries_exhausted")  # type: ignore[attr-defined]
    f = _decide(ErrorSeverity.RETRIABLE, attempt=1, policy=FRAMEWORK_RETRY)
    assert f.delay_s == 0.2  # type: ignore[attr-defined]
    assert _decide(ErrorSeverity.RETRIABLE, attempt=1, retry_after_s=2.0).delay_s == 2.0  # type: ignore[attr-defined]


def test_retriable_never_retries_after_output() -> None:
    d = _decide(ErrorSeverity.RETRIABLE, output_started=True)
    assert (d.action, d.reason) == (Action.STOP, "output_started")  # type: ignore[attr-defined]


def test_reclassification_and_replanning_limits() -> None:
    ok = _decide(ErrorSeverity.RECLASSIFICATION, can_reclassify=True)
    assert ok.action is Action.RECLASSIFY  # type: ignore[attr-defined]
    spent = _decide(ErrorSeverity.RECLASSIFICATION, can_reclassify=True, counters=Counters(reclassifications=1))
    assert (spent.action, spent.reason) == (Action.STOP, "reclassifications_exhausted")  # type: ignore[attr-defined]
    assert _decide(ErrorSeverity.RECLASSIFICATION).action is Action.STOP  # type: ignore[attr-defined]
    assert _decide(ErrorSeverity.RECLASSIFICATION, can_escalate=True).action is Action.ESCALATE  # type: ignore[attr-defined]
    assert _decide(ErrorSeverity.REPLANNING, can_replan=True, counters=Counters(replans=1)).action is Action.REPLAN  # type: ignore[attr-defined]
    assert _decide(ErrorSeverity.REPLANNING, can_replan=True, counters=Counters(replans=2)).action is Action.STOP  # type: ignore[attr-defined]


def test_fatal_aborts_and_critical_stops_even_with_budget_left() -> None:
    assert _decide(ErrorSeverity.FATAL, counters=Counters(elapsed_s=1e9)).action is Action.ABORT  # type: ignore[attr-defined]
    assert _decide(ErrorSeverity.CRITICAL).action is Action.STOP  # type: ignore[attr-defined]


def test_budgets_stop_the_ladder_and_the_next_attempt() -> None:
    limits = Limits(max_steps=3, time_limit_s=10.0)
    assert _decide(ErrorSeverity.RETRIABLE, limits=limits, counters=Counters(steps=3)).reason == "max_steps"  # type: ignore[attr-defined]
    assert _decide(ErrorSeverity.RETRIABLE, limits=limits, counters=Counters(elapsed_s=10)).reason == "time_limit"  # type: ignore[attr-defined]
    long_wait = _decide(ErrorSeverity.RETRIABLE, limits=limits, counters=Counters(elapsed_s=9.8))
    assert long_wait.reason == "time_limit"  # type: ignore[attr-defined]
    assert budget_exceeded(Counters(steps=3), limits) is None
    assert budget_exceeded(Counters(steps=4), limits) == "max_steps"
    assert budget_exceeded(Counters(steps=1, elapsed_s=10.0), limits) == "time_limit"


def test_limits_and_recovery_validate() -> None:
    with pytest.raises(UsageError):
        Limits(max_steps=0)
    with pytest.raises(UsageError):
        Recovery(time_limit_s=0)
    with pytest.raises(UsageError):
        Recovery(retry_policy=3)  # type: ignore[arg-type]
    assert Recovery().retry_policy == RetryPolicy(3, 0.5, 1.5)
    assert Recovery().framework_retry == RetryPolicy(2, 0.2, 1.0)


def test_report_has_everything_and_leaks_nothing_by_default() -> None:
    secret = "db password=hunter2 at 10.0.0.1"
    steps = [
        StepRecord("classify", True),
        StepRecord("route:billing", False, 1, 0.1, "RuntimeError", "retriable"),
        StepRecord("route:billing", False, 1, 0.1, "RuntimeError", "retriable"),
    ]
    rep = build_report(
        error=RuntimeError(secret),
        classification=ErrorClassification(ErrorSeverity.RETRIABLE),
        reason="retries_exhausted",
        operation="route:billing",
        steps=steps,
        elapsed_s=1.5,
        route="billing",
        counters={"steps": 3},
    )
    assert rep["severity"] == "retriable" and rep["route"] == "billing" and rep["operation"] == "route:billing"
    assert rep["attempts"] == {"classify": 1, "route:billing": 2}
    assert rep["elapsed_s"] == 1.5 and len(rep["steps"]) == 3 and rep["suggestions"]
    assert rep["error"] == {"type": "RuntimeError"}
    assert "hunter2" not in json.dumps(rep)
    assert "RuntimeError" not in rep["user_message"] and "billing" not in rep["user_message"]
    exposed = build_report(
        error=RuntimeError(secret), classification=None, reason="critical", operation="x", expose_details=True
    )
    assert "hunter2" in exposed["error"]["message"]
    custom = ErrorClassification(ErrorSeverity.CRITICAL, user_message="The invoice service is down.")
    assert build_report(error=None, classification=custom, reason="critical", operation="x")["user_message"] == (
        "The invoice service is down."
    )


def test_report_never_raises() -> None:
    class Evil(Exception):
        def __str__(self) -> str:
            raise RuntimeError("cannot print")

    rep = build_report(
        error=Evil(), classification=None, reason="critical", operation="x", expose_details=True, steps=[object()]
    )  # type: ignore[list-item]
    assert rep["severity"] == "critical" and rep["user_message"]


@pytest.mark.anyio
async def test_explanation_uses_the_model_and_survives_failures_and_timeouts() -> None:
    rep = build_report(error=None, classification=None, reason="critical", operation="x")
    model = ScriptedModel(["The service is busy; try later."])
    assert await explain_report(rep, model, timeout_s=5) == "The service is busy; try later."
    assert await explain_report(rep, ScriptedModel([RuntimeError("down")]), timeout_s=5) is None

    async def slow(_: object) -> str:
        await anyio.sleep(10)
        return "late"

    assert await explain_report(rep, FunctionModel(slow), timeout_s=0.01) is None
