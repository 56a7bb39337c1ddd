"""The attempt ledger: what every attempt of one run spent and did, failed attempts included.

One :class:`Ledger` belongs to a root run and is shared by every child run (routed
specialists, handoff targets, capabilities). It answers two questions the layers that
retry cannot answer on their own:

* **What did the failed attempts cost?** Every model response of the tool loop is entered
  (append-only) under the route path of the agent that made it; an architecture that
  retries a child marks the ledger before each attempt and, when the attempt fails, adds
  what was entered below the child's path since the mark (:meth:`Ledger.since`) to the
  run's usage, so ``usage`` and ``usage_by_route`` count every attempt.
* **Which tool calls already completed?** A framework retry runs a step again under the
  same step keys (the keys are rewound, as a journal replay would). A tool call that
  completed under the same key, with the same tool and arguments, is answered from the
  ledger instead of being executed again, so a retried specialist never refunds twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .tools import ToolOutcome
from .usage import NO_USAGE, Usage

__all__ = ["Ledger"]


class Ledger:
    """Usage and completed tool calls of one root run (see the module docstring).

    Attributes:
        texts: How many text deltas the run has emitted so far (compare two readings).
    """

    __slots__ = ("_spent", "_tools", "texts")

    def __init__(self) -> None:
        self.texts = 0
        self._spent: list[Any] | None = None  # path, usage, path, usage... (no tuple per entry)
        self._tools: dict[tuple[str, int], tuple[str, Mapping[str, Any], ToolOutcome]] | None = None

    def spent(self, path: tuple[str, ...], usage: Usage) -> None:
        """Enter one model response's usage under the route path of the agent that made it."""
        if self._spent is None:
            self._spent = [path, usage]
        else:
            self._spent += (path, usage)

    def mark(self) -> int:
        """A position to measure an attempt from (see :meth:`since`)."""
        return 0 if self._spent is None else len(self._spent)

    def since(self, mark: int, prefix: tuple[str, ...]) -> Usage:
        """The usage entered after ``mark`` under ``prefix`` (the path and every path below it)."""
        total = NO_USAGE
        spent = self._spent
        if spent is not None:
            n = len(prefix)
            for i in range(mark, len(spent), 2):
                if spent[i][:n] == prefix:
                    total = total + spent[i + 1]
        return total

    def completed_call(
        self, session_id: str, index: int, name: str, arguments: Mapping[str, Any]
    ) -> ToolOutcome | None:
        """The outcome of the tool call that completed at this step with these arguments, if any."""
        if self._tools is None:
            return None
        done = self._tools.get((session_id, index))
        if done is None or done[0] != name or done[1] != arguments:
            return None
        return done[2]

    def complete_call(
        self, session_id: str, index: int, name: str, arguments: Mapping[str, Any], outcome: ToolOutcome
    ) -> None:
        """Remember a tool call that completed at this step."""
        if self._tools is None:
            self._tools = {}
        self._tools[(session_id, index)] = (name, dict(arguments), outcome)
