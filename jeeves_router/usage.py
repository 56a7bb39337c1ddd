"""Token and cost accounting."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from ._frozen import constructor, frozen

__all__ = [
    "Usage",
    "NO_USAGE",
    "spent_usage",
    "with_spent_usage",
    "cut_requests",
    "spent_when_cut",
    "cut_requests_from_now",
    "cut_requests_into",
    "collecting_cut_requests",
]


@frozen
class Usage:
    """Tokens and cost of one or more model requests; ``+`` sums them.

    Attributes:
        input_tokens: Prompt tokens, cached ones included.
        output_tokens: Generated tokens.
        cached_input_tokens: The part of ``input_tokens`` served from a prompt cache.
        requests: How many model requests this covers: every request sent, failed ones
            included (a retried error, a timeout, a broken stream), as the provider counts
            them; a request that failed adds no tokens unless the provider reported some.
        cost_usd: Cost in US dollars; ``None`` when any summed request had an unknown
            price (an unknown cost is never reported as 0).
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    requests: int = 0
    cost_usd: float | None = 0.0

    def __add__(self, other: Usage) -> Usage:
        if self is NO_USAGE:  # nothing to add: no new object
            return other if isinstance(other, Usage) else NotImplemented
        if other is NO_USAGE:
            return self
        if not isinstance(other, Usage):
            return NotImplemented
        a = self.cost_usd
        b = other.cost_usd
        return _new_usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cached_input_tokens + other.cached_input_tokens,
            self.requests + other.requests,
            None if a is None or b is None else a + b,
        )

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens


_new_usage = constructor(Usage)  # a sum per model call of a run

#: Zero usage, shared (``Usage`` is immutable): a starting point that allocates nothing.
NO_USAGE = Usage()


def spent_usage(exc: BaseException) -> Usage | None:
    """The usage ``exc`` says was spent before it was raised (see :func:`with_spent_usage`), if any."""
    spent = getattr(exc, "spent_usage", None)
    return spent if isinstance(spent, Usage) else None


def with_spent_usage(exc: BaseException, usage: Usage, *, replace: bool = False) -> BaseException:
    """Mark ``exc`` with the ``usage`` spent before it was raised; returns ``exc``.

    The one way the usage of failed attempts travels with their failure: a model adapter
    marks a failed call with its requests (every request it sent, failed ones included)
    and the tokens the provider reported, a classifier adds the replies it had already paid
    for, and the layer that catches the failure counts it in the run's usage (the tool
    loop, a Router's classification, a Capabilities step) and in the run's ledger.

    Args:
        exc: The failure.
        usage: What was spent.
        replace: Set ``usage`` as the whole of it (an adapter marking the attempt it just
            made); by default it is added to what ``exc`` already carries (a nested
            classifier's, say).
    """
    before = None if replace else spent_usage(exc)
    try:
        exc.spent_usage = usage if before is None else before + usage  # type: ignore[attr-defined]
    except AttributeError:  # an exception type with __slots__: nothing to attach to
        pass
    return exc


#: Where a model call cut off by a cancellation reports what it spent (see :func:`cut_requests`).
_CUT: ContextVar[list[Usage] | None] = ContextVar("jeeves_router_cut_requests", default=None)


@contextmanager
def cut_requests() -> Iterator[list[Usage]]:
    """Collect what the model calls a cancellation cuts off inside this scope had spent.

    A time box (``Recovery(time_limit_s=...)``) cuts a wait by cancelling it, so the model
    call it cuts raises no exception of its own to carry ``spent_usage``: the call reports
    its usage here instead (:func:`spent_when_cut`), and the box marks the ``TimeoutError``
    it raises with the sum. Concurrent calls (tasks started inside the scope) report to the
    same list.
    """
    sink: list[Usage] = []
    token = _CUT.set(sink)
    try:
        yield sink
    finally:
        _CUT.reset(token)


class cut_requests_into:  # lower case: used as a function, ``with cut_requests_into(sink):``
    """:func:`cut_requests` reporting to ``sink``, a list kept across several scopes (each step of one run).

    ``RunStream`` opens one around each step of its run, so that the requests a cancellation
    or a close cuts off count in its ``spent``, and never while its consumer has an event.
    A class, not a generator: it is entered once per event of a stream.
    """

    __slots__ = ("_sink", "_token")

    def __init__(self, sink: list[Usage]) -> None:
        self._sink = sink

    def __enter__(self) -> None:
        self._token = _CUT.set(self._sink)

    def __exit__(self, *exc: object) -> None:
        try:
            _CUT.reset(self._token)
        except ValueError:  # closed by the collector in another context: nothing of ours to restore there
            pass


def spent_when_cut(usage: Usage) -> None:
    """Report what a model call spent before a cancellation cut it off (see :func:`cut_requests`).

    A request that was waiting for its answer was sent: it counts, with an unknown cost
    (the provider may bill it). Nothing happens outside a :func:`cut_requests` scope.
    """
    sink = _CUT.get()
    if sink is not None and usage is not NO_USAGE:
        sink.append(usage)


def cut_requests_from_now() -> Callable[[], Usage]:
    """What the model calls cut off from now on, in the current :func:`cut_requests` scope, had spent.

    Returns a function that sums the calls reported to the scope (:func:`spent_when_cut`)
    since this call, without collecting them (the scope's owner still counts them): how a
    journaled run that is cut off tells what it had spent (its ``run.end`` ``cut``), as the
    HTTP server that cut it does. Called outside a scope, it sums the scope open when it is
    summed, if any (the one :meth:`RunStream.aclose` opens to close the run), else
    :data:`NO_USAGE`. The calls of concurrent runs under one scope would all be counted.
    """
    sink = _CUT.get()
    start = len(sink) if sink is not None else 0

    def spent() -> Usage:
        # no scope when the run started: the one opened since, if any (RunStream.aclose's, closing it)
        kept = sink if sink is not None else _CUT.get()
        total = NO_USAGE
        for used in kept[start:] if kept is not None else ():
            total = total + used
        return total

    return spent


def collecting_cut_requests() -> bool:
    """Whether a :func:`cut_requests` scope is open here (its owner counts what is cut)."""
    return _CUT.get() is not None
