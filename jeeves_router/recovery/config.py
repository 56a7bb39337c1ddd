"""The recovery configuration an architecture runs under."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import anyio

from .._args import check_hook
from ..errors import UsageError
from ..models.base import Model
from ..policies import DEFAULT_RETRY, FRAMEWORK_RETRY, RetryPolicy, check_number
from .classify import ErrorHook
from .ladder import Limits

__all__ = ["Recovery", "Sleep"]

#: The backoff wait: ``anyio.sleep`` unless a test injects a recorder.
Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True, slots=True, kw_only=True)
class Recovery:
    """How an architecture recovers from failures.

    Attributes:
        max_reclassifications: Reclassifications per run (default 1).
        max_replans: New plans per run (default 2).
        max_steps: Cap on the attempts of steps per run, retries included: model turns,
            classifications, dispatches, plans and capability steps; a tool call is part of
            its model turn, so only its retries count. ``None`` (default): no cap beyond the
            run's own limits (the tool loop's ``max_turns``, ReAct's ``max_iterations``,
            the retry policies, ``max_replans``, ``max_reclassifications``), so a healthy run
            within them is never stopped. A number below ``max_turns`` stops a long healthy
            tool loop at that number.
        time_limit_s: Optional wall-clock limit per run (checked before every attempt,
            bounds every backoff, cuts a non-streamed step and, in a tool loop, each wait
            for the next chunk of a model stream). It does not reach into a child run: a
            Router's or Capabilities' limit stops further attempts but not a running
            specialist, whose events stream through it; give that agent its own
            ``ToolLoop(recovery=Recovery(time_limit_s=...))``, or bound the whole request
            from outside (``anyio.fail_after`` around ``run()`` or the ``stream()`` block).
        retry_policy: Policy of routes, capabilities and agent steps (3 attempts, 0.5 s, x1.5).
        framework_retry: Policy of the framework's own steps: classification, planning,
            task extraction (2 attempts, 0.2 s, x1.0).
        classify_error: A last hook ``(exc, context) -> ErrorClassification | None``,
            asked after the route's, capability's and agent's hooks. Its RETRIABLE is not
            followed once text of the failed attempt reached the consumer, nor for a model call
            its adapter gave up on (the report's ``not_retried`` says which;
            :mod:`~jeeves_router.recovery.classify`).
        reraise: Development mode: where a report would be written, raise the original
            exception instead.
        expose_details: Let an exception's message leave the run, not only its type
            (default ``False``: a message may quote provider or tool output, a key, a card
            number). On, it is shown in the report (``error.message``; the user message never
            shows it), to the models (the tool result the calling model reads, the
            reclassification and replan prompts), in the ``tool.result`` and ``run.failed``
            events, and kept in the journal; off, all of them name the type only. Logs, the
            explanation's prompt, served error replies and MCP results name the type either
            way. The runs below this one (a Router's specialists, Capabilities' agents)
            inherit it unless given a ``Recovery`` of their own (see
            :mod:`jeeves_router._shown`).
        explain_model: A model object that writes a short user-facing explanation into
            the report (``report["explanation"]``); ``None`` for none. A
            ``"provider:model"`` string is refused: pass
            ``resolve_model("openai:gpt-4.1-nano")`` (``jeeves_router.models``).
        explain_timeout_s: Time allowed for that explanation.
        sleep: The backoff wait (``anyio.sleep``; cancellable). Tests inject a recorder.
    """

    max_reclassifications: int = 1
    max_replans: int = 2
    max_steps: int | None = None
    time_limit_s: float | None = None
    retry_policy: RetryPolicy = DEFAULT_RETRY
    framework_retry: RetryPolicy = FRAMEWORK_RETRY
    classify_error: ErrorHook | None = None
    reraise: bool = False
    expose_details: bool = False
    explain_model: Model | None = None
    explain_timeout_s: float = 5.0
    sleep: Sleep = field(default=anyio.sleep, compare=False)

    def __post_init__(self) -> None:
        self.limits  # noqa: B018 - validates the bounds now, at construction
        if not isinstance(self.retry_policy, RetryPolicy) or not isinstance(self.framework_retry, RetryPolicy):
            raise UsageError("retry_policy and framework_retry must be RetryPolicy objects")
        check_number("explain_timeout_s", self.explain_timeout_s, low=0, open_low=True)
        check_hook(self.classify_error, "Recovery")
        _check_sleep(self.sleep)
        _check_explain_model(self.explain_model)

    @property
    def limits(self) -> Limits:
        """The ladder's bounds."""
        return Limits(
            max_reclassifications=self.max_reclassifications,
            max_replans=self.max_replans,
            max_steps=self.max_steps,
            time_limit_s=self.time_limit_s,
        )


def _check_sleep(sleep: object) -> None:
    """Refuse a backoff wait the ladder could not await (found at the first retry otherwise)."""
    if sleep is time.sleep:
        raise UsageError(
            "Recovery: sleep=time.sleep would block the event loop at every backoff; "
            "pass an async function such as anyio.sleep (the default) or jeeves_router.testing.RecordedSleeps()"
        )
    if not callable(sleep):
        raise UsageError(
            "Recovery: sleep must be an async function of the delay in seconds, such as anyio.sleep "
            f"(the default) or jeeves_router.testing.RecordedSleeps(); got {sleep!r:.60}"
        )


def _check_explain_model(model: object) -> None:
    """Refuse an ``explain_model`` a report could not call (its explanation would be silently missing)."""
    if model is None or isinstance(model, Model):
        return
    got = f"the string {model!r}" if isinstance(model, str) else type(model).__name__
    raise UsageError(
        f"Recovery: explain_model must be a Model object, got {got}; for a provider's model pass "
        'jeeves_router.models.resolve_model("openai:gpt-4.1-nano") (or a model of jeeves_router.testing in tests)'
    )
