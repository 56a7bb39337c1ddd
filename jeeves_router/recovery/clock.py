"""The time limit as the recovery ladder sees it: the wall clock live, the record on replay.

The ladder stops a run when its ``Recovery(time_limit_s=...)`` is spent: before an attempt
starts, when the time box cuts an attempt off, or when a failure is judged past the limit.
A replay of the completed run (``Agent.resume``) is much quicker than the run was, so its
clock would decide otherwise and call on live. The wall clock is the one input of the
ladder a replay does not reproduce; so a live run notes where the limit ended an attempt
(:meth:`~jeeves_router.runtime.Runtime.record_limit`, a journal writes it as a
``step.failed`` record), and a replay asks its runtime (``recorded_limit``) instead of
reading the clock: until the recorded point, time is not up; from it on, it is.

Every runtime that replays a run answers through that one port: a journal from its
``step.failed`` records, DBOS from the checkpoints of its workflow
(:mod:`jeeves_router.durable._dbos_limits`).

The time box is also the one place that cuts a model call off mid-wait, by cancelling it:
no exception of the call's own then carries what it spent, so the box collects it
(:func:`~jeeves_router.usage.cut_requests`: the request it was waiting on counts, it was
sent) and marks the ``TimeoutError`` it raises with it (``spent_usage``, and
:func:`take_cut` for a caller whose own counting was inside the box). A live run records
it with the limit; a replay's ``TimeoutError`` carries it again.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

import anyio

from ..runtime import LimitWhen, Runtime, StepKey
from ..usage import NO_USAGE, Usage, cut_requests, spent_usage, spent_when_cut, with_spent_usage
from .classify import mark_replayed

__all__ = ["LimitClock", "take_cut"]


_CUT = "__jeeves_time_box_cut__"  # set on a TimeoutError the time box raised, until its usage is taken (take_cut)


def take_cut(exc: BaseException) -> Usage | None:
    """What the model calls a time box cut off had spent, if ``exc`` is that box's ``TimeoutError``; once.

    For a caller whose own counting of failed calls sits inside the box (a retried step:
    :meth:`~jeeves_router.recovery.run.RecoveryRun.call`), so never saw this exception.
    Taken once: an enclosing caller does not count it again.
    """
    if not getattr(exc, _CUT, False):
        return None
    setattr(exc, _CUT, False)
    return spent_usage(exc)


def _mark_cut(exc: TimeoutError, spent: Usage | None) -> TimeoutError:
    """Mark ``exc`` as a time box's cut (``spent``: what the calls it cut off had spent)."""
    setattr(exc, _CUT, True)
    if spent is not None:
        with_spent_usage(exc, spent, replace=True)
    return exc


@dataclass(slots=True, eq=False)
class LimitClock:
    """Where one run's time limit stands, attempt by attempt.

    Attributes:
        runtime: The run's runtime (records the limit live, answers it on replay).
        key: The current attempt's key (name ``limit:<operation>``, the run's step position).
        attempt: The ladder's count of attempts, the current one included.
        recorded: ``None`` live; on replay, what the limit did to the current attempt
            (``""``: nothing).
        recorded_spent: On replay of an attempt the time box cut off: what the calls it
            cut off had spent.
        up: On replay: the recorded run's limit was spent by now.
        noted: Live: the current attempt's limit stop was recorded.
    """

    runtime: Runtime
    key: StepKey | None = None
    attempt: int = 0
    recorded: LimitWhen | Literal[""] | None = None
    recorded_spent: Usage | None = None
    up: bool = False
    noted: bool = False

    async def begin(self, key: StepKey, attempt: int) -> None:
        """An attempt starts: on replay, learn what the recorded run's limit did to it."""
        self.key, self.attempt, self.noted = key, attempt, False
        found = await self.runtime.recorded_limit(key, attempt)
        self.recorded, self.recorded_spent = (None, None) if found is None else found
        if self.recorded == "before":
            self.up = True

    def elapsed(self, measured: float) -> float:
        """The elapsed time the ladder decides on: ``measured`` live; on replay 0, or infinite once spent."""
        if self.up:
            return math.inf
        return measured if self.recorded is None else 0.0

    def remaining(self, limit: float, measured: float) -> float:
        """The time the box of the current attempt allows: ``limit`` less ``measured``, live.

        On replay of an attempt the recorded run's limit did not end before its failure, all of
        ``limit``: a slow replay does not cut a step the run completed.
        """
        if self.recorded is not None and not self.up:
            return limit
        return max(limit - measured, 0.0)

    def judged(self) -> None:
        """The attempt's failure is being judged: on replay, the limit is spent now if it was then."""
        if self.recorded == "after":
            self.up = True

    def note(self, when: LimitWhen, spent: Usage | None = None) -> None:
        """Live: record that the limit ended the current attempt (``when``), once."""
        if self.recorded is None and self.key is not None and not self.noted:
            self.noted = True
            self.runtime.record_limit(self.key, self.attempt, when, spent)

    @contextmanager
    def box(self, remaining_s: float) -> Iterator[None]:
        """A scope that ends the step when ``remaining_s`` pass (``TimeoutError`` on exit).

        The ``TimeoutError`` carries what the model calls it cut off had spent (see the
        module docstring). On replay of an attempt the limit cut off, raises that
        ``TimeoutError`` at once, before the step starts again.
        """
        if self.recorded == "during":
            self.up = True
            cut = _mark_cut(TimeoutError(), self.recorded_spent)
            mark_replayed(cut)
            raise cut
        scope = None
        own = False
        cut_off: list[Usage] = []
        try:
            with cut_requests() as cut_off:
                try:
                    with anyio.fail_after(remaining_s) as scope:
                        yield
                except TimeoutError as exc:
                    if scope is None or not scope.cancelled_caught:
                        raise
                    own = True
                    spent = _total(cut_off)
                    self.note("during", spent)
                    _mark_cut(exc, spent)
                    raise
        finally:
            if not own:  # left another way (an enclosing scope cut it): the calls are that scope's to count
                for used in cut_off:
                    spent_when_cut(used)


def _total(spent: list[Usage]) -> Usage | None:
    total = NO_USAGE
    for used in spent:
        total = total + used
    return None if total is NO_USAGE else total
