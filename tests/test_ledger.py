"""The attempt ledger: usage entered under route paths, measured from a mark."""

from __future__ import annotations

import gc

from jeeves_router.ledger import Ledger, LedgerAnswer
from jeeves_router.tools import Tool, ToolOutcome
from jeeves_router.usage import NO_USAGE, Usage


def u(tokens: int) -> Usage:
    return Usage(input_tokens=tokens, requests=1)


def named(name: str, *, repeatable: bool = False) -> Tool:
    """A tool the ledger sees (it asks its name and whether it is repeatable)."""

    def fn(id: int) -> str:
        return str(id)

    return Tool(fn, name=name, repeatable=repeatable)


REFUND, LOOKUP = named("refund"), named("lookup")


def test_an_empty_ledger_has_spent_nothing() -> None:
    ledger = Ledger()
    assert ledger.mark() == 0
    assert ledger.since(0, ()) is NO_USAGE
    assert ledger.since(0, ("a",)) is NO_USAGE


def test_since_sums_the_entries_after_the_mark_under_the_prefix() -> None:
    ledger = Ledger()
    ledger.spent(("r", "__classifier__"), u(1))
    start = ledger.mark()
    ledger.spent(("r", "a"), u(10))
    ledger.spent(("r", "b"), u(100))
    middle = ledger.mark()
    ledger.spent(("r", "a", "x"), u(1000))
    ledger.spent(("r", "ab"), u(10000))  # a sibling whose name starts alike is not below ("r", "a")
    assert (start, middle) == (1, 3)
    assert ledger.since(0, ("r",)).input_tokens == 11111
    assert ledger.since(0, ("r", "__classifier__")).input_tokens == 1
    assert ledger.since(start, ("r",)).input_tokens == 11110
    assert ledger.since(start, ("r", "a")).input_tokens == 1010
    assert ledger.since(middle, ("r", "a")).input_tokens == 1000
    assert ledger.since(middle, ("r", "b")) is NO_USAGE
    assert ledger.since(ledger.mark(), ("r",)) is NO_USAGE
    assert ledger.since(0, ("r",)).requests == 5


def test_a_single_entry_is_counted_from_mark_zero_only() -> None:
    ledger = Ledger()
    ledger.spent(("a",), u(7))
    assert ledger.since(0, ("a",)) == u(7)
    assert ledger.since(1, ("a",)) is NO_USAGE
    assert ledger.since(0, ("b",)) is NO_USAGE


def test_one_entry_holds_no_tracked_container() -> None:
    ledger = Ledger()
    ledger.spent(("a",), u(7))
    gc.collect()
    tracked = [r for r in gc.get_referents(ledger) if isinstance(r, (list, dict, tuple)) and gc.is_tracked(r)]
    assert tracked == []


def answer(outcome: ToolOutcome) -> LedgerAnswer:
    """What the ledger answers a retry's call with: the outcome, marked as not run again, without its usage."""
    return LedgerAnswer(outcome.content, outcome.is_error, outcome.handoff, outcome.context_update)


def test_a_rewound_sessions_completed_calls_each_answer_one_call_of_the_retry_at_any_step() -> None:
    ledger = Ledger()
    first, second, other = ToolOutcome("refunded"), ToolOutcome("refunded again"), ToolOutcome("elsewhere")
    assert ledger.completed_call("s", 1, REFUND, {"id": 7}) is None
    ledger.complete_call("s", 1, REFUND, {"id": 7}, first)
    ledger.complete_call("s", 3, REFUND, {"id": 7}, second)
    ledger.complete_call("t", 1, REFUND, {"id": 7}, other)
    # a retry rewinds session "s" to step 1: it looks something else up there, then refunds twice
    assert ledger.completed_call("s", 1, LOOKUP, {"id": 7}) is None
    assert ledger.completed_call("s", 3, REFUND, {"id": 7}) == answer(first)
    assert ledger.completed_call("s", 5, REFUND, {"id": 8}) is None  # other arguments: a new call
    assert ledger.completed_call("s", 7, REFUND, {"id": 7}) == answer(second)
    assert ledger.completed_call("s", 9, REFUND, {"id": 7}) is None  # none left: the retry's own call
    assert ledger.completed_call("t", 1, REFUND, {"id": 7}) == answer(other)  # another session is untouched
    assert ledger.calls == 3


def test_a_rewind_is_seen_at_the_retrys_first_step_even_when_its_first_call_comes_later() -> None:
    ledger = Ledger()
    refunded = ToolOutcome("refunded")
    ledger.complete_call("s", 1, REFUND, {"id": 7}, refunded)
    ledger.step("s", 2)  # the same pass goes on: nothing rewound
    ledger.step("s", 0)  # a retry's first model turn: session "s" starts again
    # the retry's refund comes after every step the first attempt used (a detour on the way)
    assert ledger.completed_call("s", 3, REFUND, {"id": 7}) == answer(refunded)
    assert ledger.completed_call("s", 5, REFUND, {"id": 7}) is None  # answered once


def test_a_repeatable_tools_calls_never_answer_a_retry_nor_count_as_effects() -> None:
    status = named("get_status", repeatable=True)
    ledger = Ledger()
    ledger.complete_call("s", 1, status, {"id": 7}, ToolOutcome("pending"))
    assert ledger.calls == 0  # a read: nothing a replan could repeat to harm
    ledger.complete_call("s", 3, REFUND, {"id": 7}, refunded := ToolOutcome("refunded"))
    assert ledger.calls == 1
    ledger.step("s", 0)  # a retry starts the session again
    assert ledger.completed_call("s", 1, status, {"id": 7}) is None  # executed again: a fresh status
    assert ledger.completed_call("s", 3, REFUND, {"id": 7}) == answer(refunded)
    ledger.complete_call("s", 1, status, {"id": 7}, ToolOutcome("done"))
    ledger.step("s", 0)  # and a further retry: still never answered
    assert ledger.completed_call("s", 1, status, {"id": 7}) is None
