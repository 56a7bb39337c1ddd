"""A classified failure and the exceptions that carry the ladder's decision out of a step.

:class:`Failure` is what :meth:`~jeeves_router.recovery.run.RecoveryRun.fail` returns: the
exception, how it was classified and what the ladder decided. A stop travels to the top
of the architecture's run as :class:`RecoveryStop` (a report is written there); a
reclassification or a new plan as :class:`RecoveryRedirect`, to the architecture that acts
on it. A stop by a limit (``max_steps``, the time limit) has no exception of its own: it
carries ``_BudgetSpent``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._shown import shown_error
from .ladder import Action, Decision
from .severity import ErrorClassification

__all__ = ["Failure", "RecoveryRedirect", "RecoveryStop"]  # and _BudgetSpent, for .run


@dataclass(slots=True)
class Failure:
    """A classified failure and the ladder's decision about it."""

    error: BaseException
    classification: ErrorClassification
    decision: Decision
    operation: str
    attempt: int
    route: str | None = None
    capability: str | None = None
    expose_details: bool = False

    @property
    def action(self) -> Action:
        """The decided action."""
        return self.decision.action

    def stop(self) -> RecoveryStop:
        """The exception that ends the run with a report."""
        return RecoveryStop(self)

    def raise_unless_retry(self) -> None:
        """Return for a retry; raise :class:`RecoveryRedirect` (reclassify, replan) or stop.

        The original exception is chained as ``__cause__``.
        """
        if self.action is Action.RETRY:
            return
        if self.action in (Action.RECLASSIFY, Action.REPLAN):
            raise RecoveryRedirect(self) from self.error
        raise self.stop() from self.error

    def feedback(self) -> str:
        """The failure as the next classifier or planner prompt shows it.

        A model is a third party too: the error is named by its type, with its own message
        (cut to 300 characters) only under ``Recovery(expose_details=True)``
        (:mod:`jeeves_router._shown`). The hook's user message and metadata are shown as
        :meth:`~.severity.ErrorClassification.format_for_llm` says.
        """
        where = self.capability or self.route or self.operation
        text = f"{where} failed. {self.classification.format_for_llm()}"
        return f"{text}\nError: {shown_error(self.error, expose_details=self.expose_details, limit=300)}"


class RecoveryStop(Exception):
    """Internal: the ladder decided to stop; caught at the top of the architecture's run."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.decision.reason)
        self.failure = failure


class RecoveryRedirect(Exception):
    """Internal: the ladder decided to reclassify or replan; the architecture acts on it."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.decision.reason)
        self.failure = failure


class _BudgetSpent(Exception):
    """Stands for "no failure, a limit" in a budget stop's report."""
