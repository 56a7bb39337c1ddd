"""Per-run recovery plumbing shared by every architecture.

The decisions come from :mod:`jeeves_router.recovery` (classification and the pure
ladder); this module keeps one run's counters and step records, turns a failure into a
:class:`Failure` (or raises at once for ``abort`` and ``escalate``), waits the backoff, and
ends a stopped run with its report (:mod:`._stopped`; the failure and the exceptions that
carry a decision are in :mod:`.failure`, re-exported here). An architecture drives it like this::

    await rec.begin("model")              # counts the attempt; may raise RecoveryStop
    try:
        ...                                # the step
    except Exception as exc:
        f = rec.fail(exc, operation="model", attempt=n, policy=p, hooks=h)
        # f.action is RETRY / RECLASSIFY / REPLAN (act on it) or STOP (raise f.stop())

and catches :class:`RecoveryStop` once, at the top of its ``run``, to emit the
``recovery.report`` event and end the run with status ``"critical"``.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from .._aio import each_within
from .._log import get_logger
from ..events import RecoveryReclassify, RecoveryReplan, RecoveryReport, RecoveryRetry
from ..policies import RetryPolicy
from ..runtime import StepKey
from ..usage import Usage
from ._stopped import end_stopped
from .classify import (
    ErrorContext,
    ErrorHook,
    classify_failure,
    is_replayed,
    mark_exposed,
    mark_fatal,
    remember_classification,
)
from .clock import LimitClock, take_cut
from .config import Recovery
from .failure import Failure, RecoveryRedirect, RecoveryStop, _BudgetSpent
from .ladder import Action, Counters, Decision, budget_exceeded, next_action
from .report import StepRecord
from .severity import ErrorClassification, ErrorSeverity

if TYPE_CHECKING:
    from ..architectures.base import RunContext

__all__ = ["IMPLIED_RECOVERY", "RecoveryRun", "RecoveryStop", "RecoveryRedirect", "Failure", "recovery_for"]

log = get_logger(__name__)
T = TypeVar("T")


#: The defaults an architecture recovers with when no ``Recovery`` was given (a ``classify_error``
#: hook turns recovery on; Capabilities always recover). Unlike a given one, it does not decide
#: ``expose_details``: its run keeps its parent's (:mod:`jeeves_router._shown`).
IMPLIED_RECOVERY = Recovery()


def recovery_for(config: Recovery | None, *hooks: object) -> Recovery | None:
    """The recovery config in force: ``config``, or :data:`IMPLIED_RECOVERY` when any hook is set."""
    if config is not None:
        return config
    for h in hooks:  # a loop, not any(genexpr): this runs once per run of every architecture
        if h is not None:
            return IMPLIED_RECOVERY
    return None


@dataclass(slots=True, eq=False)
class RecoveryRun:
    """One run's recovery state: counters, step records, usage so far."""

    config: Recovery
    ctx: RunContext
    can_escalate: bool = False
    started: float = field(default_factory=time.monotonic)
    steps: int = 0
    reclassifications: int = 0
    replans: int = 0
    records: list[StepRecord] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    _attempt_started: float = 0.0
    _first_key: int = 0
    _limit: LimitClock | None = None  # under a time limit: where it stands (see .clock)

    def __post_init__(self) -> None:
        # a given Recovery decides what this run shows of an exception (jeeves_router._shown) and its
        # child runs inherit it; the implied one keeps what the parent decided
        if self.config is not IMPLIED_RECOVERY:
            self.ctx.expose_details = self.config.expose_details

    @property
    def expose_details(self) -> bool:
        """Whether this run shows an exception's message (its ``Recovery``'s, else its parent's), or its type only."""
        return self.ctx.expose_details

    def elapsed(self) -> float:
        """Seconds since the run started."""
        return time.monotonic() - self.started

    def time_box(self) -> AbstractContextManager[object]:
        """A scope that ends a step (or one wait of a streamed step) when the run's wall-clock limit passes.

        Raises ``TimeoutError`` on exit (RETRIABLE by default; the ladder then stops with
        reason ``time_limit``), carrying what the model calls it cut off had spent as its
        ``spent_usage`` (see :mod:`.clock`). Never used around a ``yield``: a stream is bounded chunk by
        chunk (:meth:`bounded`). Replaying an attempt the limit cut off, raises its
        ``TimeoutError`` at once (see :mod:`.clock`).
        """
        limit = self.config.time_limit_s
        if limit is None:
            return nullcontext()
        if self._limit is None:  # no attempt began: nothing recorded to replay
            self._limit = LimitClock(self.ctx.runtime)
        return self._limit.box(self._limit.remaining(limit, self.elapsed()))

    def bounded(self, stream: AsyncIterator[T]) -> AsyncIterator[T]:
        """``stream`` with each wait for its next item in a fresh :meth:`time_box` (as is without a limit).

        One box around a streamed model call would stay open across every yield to the
        consumer; boxing each wait with the time left cuts a provider that stalls mid-stream
        (``TimeoutError``; a replay raises it at once, without a call) and never the consumer.
        """
        if self.config.time_limit_s is None:
            return stream
        return each_within(stream, self.time_box)

    def counters(self) -> Counters:
        """The ladder's view of this run (on replay, the recorded run's time limit: see :mod:`.clock`)."""
        elapsed = self.elapsed() if self._limit is None else self._limit.elapsed(self.elapsed())
        return Counters(self.steps, self.reclassifications, self.replans, elapsed)

    async def begin(self, operation: str, *, counted: bool = True) -> None:
        """Count an attempt that is about to start; raise RecoveryStop if the budget is spent.

        ``counted=False`` for the first attempt of a step that is part of a counted one (a
        tool call of a model turn): the budget is still checked, but it takes no step.

        Under a time limit, a replay of a completed run learns from the runtime where the
        recorded run's limit ended this attempt, and a live run records it (:mod:`.clock`).
        """
        if counted:
            self.steps += 1
        self._attempt_started = time.monotonic()
        ctx = self.ctx
        self._first_key = ctx._step
        if self.config.time_limit_s is not None:
            if self._limit is None:
                self._limit = LimitClock(ctx.runtime)
            await self._limit.begin(StepKey(ctx.session_id, ctx.run_id, f"limit:{operation}", ctx._step), self.steps)
        reason = budget_exceeded(self.counters(), self.config.limits)
        if reason is not None:
            if reason == "time_limit" and self._limit is not None:
                self._limit.note("before")
            cls = ErrorClassification(ErrorSeverity.CRITICAL, metadata={"limit": reason})
            decision = Decision(Action.STOP, ErrorSeverity.CRITICAL, reason=reason)
            raise RecoveryStop(Failure(_BudgetSpent(reason), cls, decision, operation, 0))

    def succeeded(self, operation: str) -> None:
        """Record the attempt of ``operation`` that succeeded."""
        self.records.append(StepRecord(operation, True, 1, time.monotonic() - self._attempt_started))

    def fail(
        self,
        exc: BaseException,
        *,
        operation: str,
        attempt: int,
        policy: RetryPolicy,
        hooks: Sequence[ErrorHook | None] = (),
        route: str | None = None,
        capability: str | None = None,
        can_reclassify: bool = False,
        can_replan: bool = False,
        output_started: bool = False,
        effects_done: bool = False,
    ) -> Failure:
        """Classify ``exc`` and decide; raises ``exc`` itself for ``abort`` and ``escalate``."""
        ectx = ErrorContext(operation, attempt, self.ctx.session_id, self.ctx.path, route, capability, self.ctx.context)
        cls = classify_failure(exc, ectx, (*hooks, self.config.classify_error))
        remember_classification(exc, cls)  # a journal records the failure as judged (a replay judges so)
        if self.expose_details:  # a journal keeps its message, which this ladder's prompts show
            mark_exposed(exc)
        if self._limit is not None:
            self._limit.judged()
        decision = next_action(
            cls.severity,
            attempt=attempt,
            policy=policy,
            counters=self.counters(),
            limits=self.config.limits,
            can_reclassify=can_reclassify,
            can_replan=can_replan,
            can_escalate=self.can_escalate,
            output_started=output_started,
            effects_done=effects_done,
            retry_after_s=getattr(exc, "retry_after_s", None),
            retries_exhausted=bool(getattr(exc, "retries_exhausted", False)),
        )
        if decision.reason == "time_limit" and self._limit is not None:
            self._limit.note("after")
        self.records.append(
            StepRecord(
                operation, False, 1, time.monotonic() - self._attempt_started, type(exc).__name__, cls.severity.value
            )
        )
        log.info(
            "step failed",
            operation=operation,
            attempt=attempt,
            error_type=type(exc).__name__,
            severity=cls.severity.value,
            action=decision.action.value,
            reason=decision.reason,
            session_id=self.ctx.session_id,
        )
        if decision.action is Action.ABORT:
            mark_fatal(exc)
            raise exc
        if decision.action is Action.ESCALATE:
            raise exc
        return Failure(exc, cls, decision, operation, attempt, route, capability, self.expose_details)

    async def call(
        self,
        operation: str,
        fn: Callable[[], Awaitable[T]],
        *,
        after: Failure | None = None,
        policy: RetryPolicy | None = None,
        hooks: Sequence[ErrorHook | None] = (),
        route: str | None = None,
        capability: str | None = None,
        can_reclassify: bool = False,
        can_replan: bool = False,
        within_turn: bool = False,
        spent: Callable[[Usage], None] | None = None,
    ) -> T | Failure:
        """One attempt of ``fn`` under the ladder: its value, or the :class:`Failure` to retry.

        The caller announces and waits the retry, then calls again with ``after=`` the
        failure; :meth:`call_retrying` is that loop.

        A stop raises :class:`RecoveryStop`, a reclassify or replan raises
        :class:`RecoveryRedirect`, abort and escalate raise the original exception.
        ``policy`` defaults to the framework policy. ``within_turn``: the step is part of a
        model turn (a tool call), so only its retries count towards ``max_steps``.
        ``spent`` counts what the model calls the time box cut off had spent (``fn`` counts
        its own failed calls; the cut is raised around it, see :mod:`.clock`).
        """
        attempt = 1 if after is None else after.attempt + 1
        await self.begin(operation, counted=after is not None or not within_turn)
        try:
            with self.time_box():
                value = await fn()
        except Exception as exc:
            if spent is not None:
                cut = take_cut(exc)
                if cut is not None:
                    spent(cut)
            f = self.fail(
                exc,
                operation=operation,
                attempt=attempt,
                policy=policy or self.config.framework_retry,
                hooks=hooks,
                route=route,
                capability=capability,
                can_reclassify=can_reclassify,
                can_replan=can_replan,
            )
            f.raise_unless_retry()
            return f
        self.succeeded(operation)
        return value

    async def call_retrying(
        self,
        operation: str,
        fn: Callable[[], Awaitable[T]],
        *,
        policy: RetryPolicy | None = None,
        hooks: Sequence[ErrorHook | None] = (),
        can_replan: bool = False,
        within_turn: bool = False,
        spent: Callable[[Usage], None] | None = None,
    ) -> T:
        """:meth:`call` until ``fn`` succeeds, each retry announced (``recovery.retry``) and waited.

        The one retry loop of a step: a stop, redirect, abort or escalate raises as in
        :meth:`call`.
        """
        kw: dict[str, Any] = {
            "policy": policy,
            "hooks": hooks,
            "can_replan": can_replan,
            "within_turn": within_turn,
            "spent": spent,
        }
        out = await self.call(operation, fn, **kw)
        while isinstance(out, Failure):
            await self.ctx.emit(self.retry_event(out))
            await self.backoff(out)
            out = await self.call(operation, fn, after=out, **kw)
        return out

    def retry_event(self, f: Failure) -> RecoveryRetry:
        """The ``recovery.retry`` event announcing the next attempt of ``f``'s step."""
        return RecoveryRetry(
            session_id=self.ctx.session_id,
            path=self.ctx.path,
            operation=f.operation,
            attempt=f.attempt + 1,
            delay_s=f.decision.delay_s,
            severity=f.classification.severity.value,
            error=type(f.error).__name__,
        )

    async def backoff(self, f: Failure) -> None:
        """Wait the decided delay (cancellable), then rewind the run's step counter.

        A retry is the same step again, so it takes the same journal keys as the failed
        attempt: a replay then finds the successful attempt. A failure a replay raised
        again (it was waited for when it happened) is not waited for again.
        """
        if not is_replayed(f.error):
            await self.config.sleep(f.decision.delay_s)
        self.ctx._step = self._first_key

    def reclassify_event(self, f: Failure, excluded: Sequence[str]) -> RecoveryReclassify:
        """Count a reclassification and return its event (call just before it starts)."""
        self.reclassifications += 1
        return RecoveryReclassify(
            session_id=self.ctx.session_id,
            path=self.ctx.path,
            attempt=self.reclassifications,
            excluded=tuple(excluded),
            error=type(f.error).__name__,
        )

    def replan_event(self, f: Failure) -> RecoveryReplan:
        """Count a replan and return its event (call just before it starts)."""
        self.replans += 1
        return RecoveryReplan(
            session_id=self.ctx.session_id, path=self.ctx.path, attempt=self.replans, error=type(f.error).__name__
        )

    async def stopped(self, stop: RecoveryStop, **result: Any) -> RecoveryReport:
        """Write the report, set a ``critical`` result and return the ``recovery.report`` event.

        In development mode (``Recovery(reraise=True)``) the original exception is raised instead.
        ``result`` holds extra :class:`RunResult` fields (route, metadata...). The ``explain_model``
        call is a step of the run (journaled) and counts in its usage.
        """
        return await end_stopped(self, stop, result)
