"""The escalation ladder: one pure function from a failure to the next action.

Every architecture calls :func:`next_action` after a failed step and acts on the
:class:`Decision` (the architecture acts and emits the event; this module only decides).
:func:`budget_exceeded` is the check made when an attempt *starts*: counters go up when an
attempt begins, not when it ends, so a reclassifier or planner that fails in turn cannot
loop, and ``max_steps`` and the wall-clock limit hold whatever happens inside a step.

What ``max_steps`` counts: one step per attempt of a model turn, a classification, a
dispatch, a plan or ReAct decision, a capability step or a task extraction, retries
included. A tool call is part of the model turn that asked for it (the tool loop's
``max_turns`` bounds those turns), so only its retries count. Its default is ``None``: the
run is bounded by its own limits (``max_turns``, ``max_iterations``, each step's retry
policy, ``max_replans``, ``max_reclassifications``, ``time_limit_s``), so a healthy run within
them is never stopped by recovery; a number caps the attempts on top of them.

The rules, in order:

1. FATAL → ``abort`` (the original exception is raised, from anywhere).
2. The wall clock or ``max_steps`` is spent → ``stop``.
3. RETRIABLE → ``retry`` after the policy's backoff while attempts remain, no output of the
   failed attempt reached the consumer (a retry would repeat it) and no inner owner (the
   model adapter's retrier) has already spent its retries on the failure; else ``stop``
   (whatever a hook answered: the report's ``not_retried`` says why it was not retried).
4. RECLASSIFICATION → ``reclassify`` while ``max_reclassifications`` allows it and the
   architecture can classify; an architecture that cannot (a tool loop inside a router)
   escalates to its parent; else ``stop``.
5. REPLANNING → ``replan`` likewise under ``max_replans``, unless a tool call of the failed
   attempt completed (a ``repeatable`` tool's does not count): a new plan may run that step
   again from its start, and the ledger
   only answers a completed call for the same step (a retry), so the run stops instead
   (``effects_done``) rather than execute a side effect twice; else escalate or stop.
6. CRITICAL → ``stop`` (a report, or the original exception in development mode).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from ..policies import RetryPolicy, check_count, check_number
from .severity import ErrorSeverity

__all__ = ["Action", "Decision", "Limits", "Counters", "next_action", "budget_exceeded"]


class Action(str, Enum):
    """What the architecture does after a failure."""

    RETRY = "retry"
    RECLASSIFY = "reclassify"
    REPLAN = "replan"
    ESCALATE = "escalate"
    STOP = "stop"
    ABORT = "abort"


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds of one run's recovery.

    Attributes:
        max_reclassifications: Reclassifications per run (default 1).
        max_replans: New plans per run (default 2).
        max_steps: Attempts of steps per run (model turns, classifications, dispatches,
            capability steps, plans; a tool call only for its retries), retries included;
            ``None`` (default): no cap beyond the run's own limits (see the module docs).
        time_limit_s: Wall-clock limit of the run, checked before every attempt and
            bounding every backoff; ``None`` for none.
    """

    max_reclassifications: int = 1
    max_replans: int = 2
    max_steps: int | None = None
    time_limit_s: float | None = None

    def __post_init__(self) -> None:
        check_count("max_reclassifications", self.max_reclassifications, 0)
        check_count("max_replans", self.max_replans, 0)
        if self.max_steps is not None:
            check_count("max_steps", self.max_steps, 1)
        if self.time_limit_s is not None:
            check_number("time_limit_s (seconds, or None)", self.time_limit_s, low=0, open_low=True)


@dataclass(frozen=True, slots=True)
class Counters:
    """Where a run stands: attempts started so far and time spent."""

    steps: int = 0
    reclassifications: int = 0
    replans: int = 0
    elapsed_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Decision:
    """The ladder's answer.

    Attributes:
        action: What to do next.
        severity: The severity that led here.
        delay_s: The backoff before a retry.
        reason: Why, in a few words (for events and the report).
    """

    action: Action
    severity: ErrorSeverity
    delay_s: float = 0.0
    reason: str = ""


def budget_exceeded(counters: Counters, limits: Limits) -> str | None:
    """Why no further attempt may start (``"max_steps"``, ``"time_limit"``), or ``None``.

    ``counters.steps`` counts the attempt about to start.
    """
    if limits.max_steps is not None and counters.steps > limits.max_steps:
        return "max_steps"
    if limits.time_limit_s is not None and counters.elapsed_s >= limits.time_limit_s:
        return "time_limit"
    return None


def next_action(
    severity: ErrorSeverity,
    *,
    attempt: int,
    policy: RetryPolicy,
    counters: Counters,
    limits: Limits,
    can_reclassify: bool = False,
    can_replan: bool = False,
    can_escalate: bool = False,
    output_started: bool = False,
    retry_after_s: float | None = None,
    retries_exhausted: bool = False,
    effects_done: bool = False,
) -> Decision:
    """Decide what follows a failed attempt (pure; see the module docstring).

    Args:
        severity: The failure's severity.
        attempt: The 1-based number of the attempt of this step that failed.
        policy: The step's retry policy.
        counters: The run's counters (attempts already started, elapsed time).
        limits: The run's bounds.
        can_reclassify: The architecture can classify again (a router, capabilities).
        can_replan: The architecture can make a new plan.
        can_escalate: An enclosing architecture can handle what this one cannot.
        output_started: Text of the failed attempt already reached the consumer.
        retry_after_s: A delay the provider asked for.
        retries_exhausted: The failure's own retry owner (the adapter) spent its attempts.
        effects_done: A tool call of the failed attempt completed (a replan could repeat it).
    """
    if severity is ErrorSeverity.FATAL:
        return Decision(Action.ABORT, severity, reason="fatal")
    if limits.time_limit_s is not None and counters.elapsed_s >= limits.time_limit_s:
        return Decision(Action.STOP, severity, reason="time_limit")
    spent = limits.max_steps is not None and counters.steps >= limits.max_steps
    if spent and severity is not ErrorSeverity.CRITICAL:
        return Decision(Action.STOP, severity, reason="max_steps")
    if severity is ErrorSeverity.RETRIABLE:
        if output_started:
            return Decision(Action.STOP, severity, reason="output_started")
        if retries_exhausted or attempt >= policy.max_attempts:
            return Decision(Action.STOP, severity, reason="retries_exhausted")
        delay = policy.delay_s(attempt, retry_after_s=retry_after_s)
        if limits.time_limit_s is not None and counters.elapsed_s + delay >= limits.time_limit_s:
            return Decision(Action.STOP, severity, delay_s=delay, reason="time_limit")
        return Decision(Action.RETRY, severity, delay_s=delay, reason="retry")
    if severity is ErrorSeverity.RECLASSIFICATION:
        return _redirect(
            Action.RECLASSIFY,
            severity,
            can_reclassify,
            can_escalate,
            output_started,
            counters.reclassifications < limits.max_reclassifications,
            "reclassifications_exhausted",
        )
    if severity is ErrorSeverity.REPLANNING:
        if effects_done and can_replan and not output_started:
            return Decision(Action.STOP, severity, reason="effects_done")
        return _redirect(
            Action.REPLAN,
            severity,
            can_replan,
            can_escalate,
            output_started,
            counters.replans < limits.max_replans,
            "replans_exhausted",
        )
    return Decision(Action.STOP, severity, reason="critical")


def _redirect(
    action: Action,
    severity: ErrorSeverity,
    able: bool,
    can_escalate: bool,
    output_started: bool,
    within_limit: bool,
    exhausted: str,
) -> Decision:
    if not able:
        if can_escalate:
            return Decision(Action.ESCALATE, severity, reason=f"{action.value}_not_here")
        return Decision(Action.STOP, severity, reason=f"{action.value}_unavailable")
    if output_started:
        return Decision(Action.STOP, severity, reason="output_started")
    if not within_limit:
        return Decision(Action.STOP, severity, reason=exhausted)
    return Decision(action, severity, reason=action.value)
