"""Misuse fails early with a UsageError that names the problem."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from jeeves_router import Agent, LLMClassifier, RetryPolicy, Router, RouterRoute, UsageError, tool
from jeeves_router.testing import ScriptedModel, StaticClassifier

pytestmark = pytest.mark.anyio


def _spec() -> Agent:
    return Agent("s", name="billing", model=ScriptedModel(["ok"]))


def _router(**kw: Any) -> Router:
    return Router([RouterRoute("billing", _spec())], **kw)


def _varargs(*items: str) -> str:
    return ""


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: _router(classifier=StaticClassifier("billing"), classifier_model=ScriptedModel([])), "not both"),
        (lambda: _router(classifier=object()), "async classify"),
        (lambda: _router(history_turns=-1), "history_turns"),
        (lambda: Router([object()]), "RouterRoute objects"),  # type: ignore[list-item]
        (lambda: Router([RouterRoute("billing", object())]), "must be an Agent"),  # type: ignore[arg-type]
        (lambda: LLMClassifier(ScriptedModel([]), max_format_retries=-1), "max_format_retries"),
        (lambda: LLMClassifier(ScriptedModel([]), on_bad_confidence=2.0), "on_bad_confidence"),
        (lambda: tool(_varargs), r"\*args/\*\*kwargs"),
        (lambda: tool(name="no spaces allowed")(lambda: 1), "tool name"),
        (lambda: RetryPolicy(max_attempts=0), "max_attempts"),
        (lambda: RetryPolicy(multiplier=0.5), "multiplier"),
        (lambda: RetryPolicy(jitter=2.0), "jitter"),
        (lambda: Agent(42, name="a"), "instructions must be a string"),  # type: ignore[arg-type]
    ],
)
def test_construction_misuse(make: Callable[[], object], match: str) -> None:
    with pytest.raises(UsageError, match=match):
        make()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"session_id": ""}, "session_id"), ({"session_id": 7}, "session_id")],
)
async def test_run_misuse(kwargs: dict[str, Any], match: str) -> None:
    agent = Agent("a", name="a", model=ScriptedModel(["ok"]))
    with pytest.raises(UsageError, match=match):
        await agent.run("x", **kwargs)
    with pytest.raises(UsageError, match="prompt must be a string"):
        await agent.run(None)  # type: ignore[arg-type]


async def test_architecture_without_result_is_a_clear_error() -> None:
    class Silent:
        def validate(self, agent: Agent) -> None:
            pass

        async def run(self, agent: Agent, ctx: Any) -> Any:
            if False:
                yield None

    agent = Agent("a", name="a", architecture=Silent())  # type: ignore[arg-type]
    with pytest.raises(RuntimeError, match="Silent ended without a result"):
        await agent.run("x")


def test_retry_policy_delays() -> None:
    import random

    p = RetryPolicy(max_attempts=4, initial_delay_s=0.5, multiplier=2.0, max_delay_s=1.5)
    assert [p.delay_s(a) for a in (1, 2, 3)] == [0.5, 1.0, 1.5]
    assert p.delay_s(1, retry_after_s=10.0) == 1.5  # Retry-After is capped too
    j = RetryPolicy(initial_delay_s=1.0, jitter=0.5)
    delays = {j.delay_s(1, rng=random.Random(s)) for s in range(20)}
    assert all(0.5 <= d <= 1.0 for d in delays) and len(delays) > 1
    assert j.delay_s(1, rng=random.Random(3)) == j.delay_s(1, rng=random.Random(3))
