"""``Recovery``'s ``sleep`` and ``explain_model`` are checked where the Recovery is made.

Both used to be taken as given: ``sleep=1`` or ``sleep=time.sleep`` failed only at the first
retry, with a ``TypeError`` from inside the run (``time.sleep`` after blocking the event loop),
and ``explain_model="openai:gpt-4.1-mini"`` — the form every other model option takes —
was called as a model when a report was written, failed, and the report silently had no
explanation.
"""

from __future__ import annotations

import time

import pytest

from jeeves_router import Recovery, UsageError
from jeeves_router.testing import RecordedSleeps, ScriptedModel


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"sleep": 1}, r"Recovery: sleep must be an async function of the delay in seconds.*got 1"),
        ({"sleep": time.sleep}, r"Recovery: sleep=time\.sleep would block the event loop.*anyio\.sleep"),
        (
            {"explain_model": "openai:gpt-4.1-mini"},
            r"Recovery: explain_model must be a Model object, got the string 'openai:gpt-4\.1-mini'.*resolve_model",
        ),
        ({"explain_model": 42}, r"Recovery: explain_model must be a Model object.*got int"),
    ],
)
def test_a_sleep_or_explain_model_that_could_not_be_used_is_refused(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(UsageError, match=match):
        Recovery(**kwargs)  # type: ignore[arg-type]


def test_a_model_object_and_an_async_sleep_are_taken() -> None:
    model, sleeps = ScriptedModel([]), RecordedSleeps()
    recovery = Recovery(explain_model=model, sleep=sleeps)
    assert recovery.explain_model is model and recovery.sleep is sleeps
