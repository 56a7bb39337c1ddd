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
  completed in an earlier attempt of the same session, with the same tool and arguments,
  is answered from the ledger instead of being executed again, so a retried specialist
  never refunds twice — also when the retried model takes another path to the same call
  (looks the invoice up first, so the refund comes at a later step). Each completed call
  answers one call of the retry, in order; a call the earlier attempt did not make runs.
  The rewind is seen at the retry's first step (:meth:`Ledger.step`, for every key a run
  takes: its first model turn), not only at its first tool call, which may come after every
  step the abandoned attempt used (a detour through a tool that does not exist).

  A function capability's call (an async function the Capabilities architecture calls, not
  an agent) is a call here as a tool's is, answered with its output (usage dropped), and
  has its ``repeatable`` flag too: :class:`Callee` is what the ledger asks of either.

  A tool marked :attr:`~jeeves_router.tools.Tool.repeatable` (harmless to call twice,
  typically a read: a job's status, a balance) is the exception, and the one question the
  ledger asks of a tool: its calls are neither pooled nor answered, so a retry executes
  them again and sees the value as it is now, not the abandoned attempt's; nor are they
  counted in :attr:`Ledger.calls` (a failed step that only read may be replanned). A
  journal is another matter: a resume, or a retry at steps the journal holds, replays
  recorded results, model turns included.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import is_dataclass, replace
from typing import Any, Protocol

from ._frozen import frozen
from .tools import ToolOutcome
from .usage import NO_USAGE, Usage


@frozen
class LedgerAnswer(ToolOutcome):
    """The outcome of a completed tool call, answering a retry's same call: the tool does not run again."""


@frozen
class SkippedCall(ToolOutcome):
    """A call whose outcome is unknown, not made again: the answer under ``on_unknown_tool_outcome="skip"``.

    The call started before a crash (or in another process) and may have had its effect. Its
    outcome is an error result for the model (``is_error``), yet, unlike a call that failed,
    the ledger keeps it as a completed call (:meth:`Ledger.complete_call`): it counts in
    :attr:`Ledger.calls`, so the step that made it has effects (a replan stops, a repeat is
    answered), and it answers a retry's same call with this outcome instead of making it.
    """


__all__ = ["Callee", "Ledger", "LedgerAnswer", "SkippedCall"]


class Callee(Protocol):
    """What the ledger asks of a call's callee: a :class:`~jeeves_router.tools.Tool` or a function ``Capability``."""

    @property
    def name(self) -> str:
        """Its name (a call matches an earlier one of the same name and arguments)."""
        ...

    @property
    def repeatable(self) -> bool:
        """Harmless to call twice (a read): its calls are never answered, only counted in ``reads``."""
        ...


def _answer(outcome: Any) -> Any:
    """How a completed call's outcome answers a retry: a tool's as a :class:`LedgerAnswer`, any other without usage."""
    if isinstance(outcome, ToolOutcome):
        return LedgerAnswer(outcome.content, outcome.is_error, outcome.handoff, outcome.context_update)
    if is_dataclass(outcome) and not isinstance(outcome, type) and getattr(outcome, "usage", NO_USAGE) != NO_USAGE:
        return replace(outcome, usage=NO_USAGE)  # type: ignore[call-arg]
    return outcome


class Ledger:
    """Usage and completed tool calls of one root run (see the module docstring).

    Attributes:
        texts: How many text deltas the run has emitted so far (compare two readings).
        calls: How many tool calls have completed so far (compare two readings: did a
            failed attempt have side effects?), a ``repeatable`` tool's not counted.
        reads: How many calls of ``repeatable`` tools have completed so far (did a step read
            data that may have changed since?).
        answered: How many calls the ledger has answered so far (:meth:`completed_call`):
            compare two readings to tell whether a call was answered, not run (a function
            capability's output says nothing of it; a tool's is a :class:`LedgerAnswer`).
    """

    __slots__ = (
        "_first_path",
        "_first_usage",
        "_last",
        "_more",
        "_pooled",
        "_tools",
        "answered",
        "calls",
        "reads",
        "texts",
    )

    def __init__(self) -> None:
        self.texts = 0
        self.calls = 0
        self.reads = 0
        self.answered = 0
        # The first entry in two slots, the later ones in a list (path, usage, path, usage...):
        # a run that made one model call so far holds no GC-tracked list for it.
        self._first_path: tuple[str, ...] | None = None
        self._first_usage: Usage = NO_USAGE
        self._more: list[Any] | None = None
        self._tools: dict[tuple[str, int], tuple[str, Mapping[str, Any], Any]] | None = None
        # per session: no call of ``_tools`` is at a later step than this (a step at or before it is a retry's)
        self._last: dict[str, int] | None = None
        # per session: the calls completed by attempts that a retry rewound past, not yet answered again
        self._pooled: dict[str, list[tuple[str, Mapping[str, Any], Any]]] | None = None

    def spent(self, path: tuple[str, ...], usage: Usage) -> None:
        """Enter one model response's usage under the route path of the agent that made it."""
        if self._first_path is None:
            self._first_path, self._first_usage = path, usage
        elif self._more is None:
            self._more = [path, usage]
        else:
            self._more += (path, usage)

    def mark(self) -> int:
        """A position to measure an attempt from (see :meth:`since`): the number of entries so far."""
        if self._first_path is None:
            return 0
        return 1 if self._more is None else 1 + len(self._more) // 2

    def since(self, mark: int, prefix: tuple[str, ...]) -> Usage:
        """The usage entered after ``mark`` under ``prefix`` (the path and every path below it)."""
        total = NO_USAGE
        first = self._first_path
        if first is None:
            return total
        n = len(prefix)
        if mark == 0 and first[:n] == prefix:
            total = self._first_usage
        more = self._more
        if more is not None:
            for i in range(2 * max(mark - 1, 0), len(more), 2):
                if more[i][:n] == prefix:
                    total = total + more[i + 1]
        return total

    def step(self, session_id: str, index: int) -> None:
        """Note that a step of ``session_id`` takes key ``index`` (every key a run takes: see ``RunContext.next_key``).

        Within one pass a session's step indexes only grow: a call completed at ``index`` or
        later means a retry rewound the session to ``index``, so every call completed from
        there on belongs to an abandoned attempt and may answer one call of this one
        (:meth:`completed_call`). Seen at the retry's first step, whatever that step is.
        """
        last = self._last.get(session_id) if self._last is not None else None
        if last is None or index > last:
            return
        assert self._last is not None
        tools = self._tools
        assert tools is not None
        rewound = sorted(k for k in tools if k[1] >= index and k[0] == session_id)
        if rewound:
            pooled = self._pooled if self._pooled is not None else {}
            self._pooled = pooled
            pooled.setdefault(session_id, []).extend(tools.pop(k) for k in rewound)
        self._last[session_id] = index - 1  # the calls left in ``_tools`` are before this step

    def completed_call(self, session_id: str, index: int, tool: Callee, arguments: Mapping[str, Any]) -> Any:
        """The outcome of an earlier attempt's call of this tool with these arguments, if any is left.

        An abandoned attempt's calls (see :meth:`step`) answer the calls of the retry, one
        each, in the order they completed. A ``repeatable`` tool's call is never answered.
        ``tool`` may be a function capability too (:class:`Callee`); ``None`` when none is left.
        """
        self.step(session_id, index)
        pool = self._pooled.get(session_id) if self._pooled is not None else None
        if not pool or tool.repeatable:
            return None
        name = tool.name
        for n, done in enumerate(pool):
            if done[0] == name and done[1] == arguments:
                del pool[n]
                self._remember(session_id, index, done)  # this attempt's call at this step (a further retry finds it)
                self.answered += 1
                return done[2]
        return None

    def complete_call(
        self, session_id: str, index: int, tool: Callee, arguments: Mapping[str, Any], outcome: Any
    ) -> None:
        """Remember a tool call that completed at this step (a ``repeatable`` tool's is not: no effect to keep).

        An outcome with ``is_error`` set (a failed call) is not kept: a retry makes the call
        again. A :class:`SkippedCall` is (its outcome unknown, it may have had its effect).
        The outcome is kept as a :class:`LedgerAnswer` (so the retry's ``tool.result`` says the
        tool did not run again), without its :attr:`~ToolOutcome.usage` (an agent the tool ran):
        the call ran once, and its usage was counted then (an enclosing retry counts the
        abandoned attempt's from :meth:`since`), so answering a retry with it adds nothing.
        A function capability's output (:class:`Callee`) is kept as it is, without its usage.
        """
        if getattr(outcome, "is_error", False) and type(outcome) is not SkippedCall:
            return
        if tool.repeatable:
            self.reads += 1
            return
        self.calls += 1
        self._remember(session_id, index, (tool.name, dict(arguments), _answer(outcome)))

    def _remember(self, session_id: str, index: int, done: tuple[str, Mapping[str, Any], Any]) -> None:
        if self._tools is None:
            self._tools = {}
        self._tools[(session_id, index)] = done
        if self._last is None:
            self._last = {}
        last = self._last.get(session_id)
        self._last[session_id] = index if last is None or index > last else last
