r"""The test kit: scripted models, a static classifier, event capture, and a real-call switch.

Library code never imports this module.

Example:
    A scripted model answers each request with the next step of its script and keeps the
    requests it was sent:

    >>> import anyio
    >>> from jeeves_router import Agent
    >>> from jeeves_router.testing import Chunks, ScriptedModel, capture_events
    >>> model = ScriptedModel([Chunks("Refund ", "issued.")])
    >>> billing = Agent("You resolve payments.", name="billing", model=model)
    >>> events = anyio.run(capture_events, billing, "I was charged twice")
    >>> [ev.kind for ev in events]
    ['run.started', 'text.delta', 'text.delta', 'run.completed']
    >>> [ev.text for ev in events if ev.kind == "text.delta"]
    ['Refund ', 'issued.']
    >>> model.requests[0].messages[-1].text
    'I was charged twice'
    >>> model.assert_complete()  # every step was used
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Union

import anyio

from ._aio import aclosing
from ._args import listed
from ._testing_classifier import StaticClassifier
from .errors import ScriptExhausted, UsageError
from .events import Event
from .messages import Part, TextPart, ToolCallPart
from .models.base import ModelRequest, ModelResponse, ModelStreamItem, ModelTextDelta
from .settings import block_real_model_calls, real_model_calls_blocked
from .tracing import traced_model_call, traced_model_stream
from .usage import Usage, spent_when_cut, with_spent_usage

__all__ = [
    "ScriptedModel",
    "FunctionModel",
    "Chunks",
    "Call",
    "Reply",
    "StaticClassifier",
    "RecordedSleeps",
    "capture_events",
    "block_real_model_calls",
    "real_model_calls_blocked",
    "DEFAULT_USAGE",
    "FAILED_USAGE",
    "CUT_USAGE",
]

#: The usage a scripted reply reports unless told otherwise.
DEFAULT_USAGE = Usage(input_tokens=10, output_tokens=5, requests=1, cost_usd=0.0)
#: What a scripted failure spent: the request was sent, as a real adapter counts it.
FAILED_USAGE = Usage(requests=1, cost_usd=0.0)
#: What a request cut off by a cancellation (a run's time limit) spent: sent, its cost unknown.
CUT_USAGE = Usage(requests=1, cost_usd=None)


def _failed(exc: BaseException, reply: Reply | None = None) -> BaseException:
    """``exc``, raised by a scripted request: marked as one request spent (see :class:`Reply`)."""
    used = reply.usage if reply is not None and reply.usage is not DEFAULT_USAGE else FAILED_USAGE
    return with_spent_usage(exc, used, replace=True)


@dataclass(frozen=True)
class Chunks:
    """A reply streamed as these text chunks."""

    chunks: tuple[str, ...]

    def __init__(self, *chunks: str) -> None:
        object.__setattr__(self, "chunks", tuple(chunks))


@dataclass(frozen=True)
class Call:
    """A tool call in a scripted reply."""

    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    id: str | None = None
    raw_arguments: str | None = None
    argument_error: str | None = None


@dataclass(frozen=True)
class Reply:
    """A full scripted reply: text (optionally chunked), tool calls, usage, stop reason.

    With ``error``, the reply fails part-way: a stream yields the text chunks and then
    raises ``error`` instead of completing (a connection dropped mid-answer); a plain
    request raises it at once. ``Reply(Chunks("Refund ", "iss"), error=ConnectionResetError())``.
    The failure still spent a request, as with a real provider: ``error`` carries
    ``usage`` as its ``spent_usage`` (what the provider had reported) when it is given,
    else one request without tokens; so does a scripted exception.
    """

    text: str | Chunks = ""
    calls: Sequence[Call] = ()
    usage: Usage = DEFAULT_USAGE
    stop_reason: str | None = None
    error: BaseException | None = None


Step = Union[str, Chunks, Call, Sequence[Call], Reply, ModelResponse, BaseException]


def _to_reply(step: Step) -> Reply | ModelResponse | BaseException:
    if isinstance(step, (Reply, ModelResponse, BaseException)):
        return step
    if isinstance(step, (str, Chunks)):
        return Reply(text=step)
    if isinstance(step, Call):
        return Reply(calls=(step,))
    if isinstance(step, Sequence) and all(isinstance(c, Call) for c in step):
        return Reply(calls=tuple(c for c in step if isinstance(c, Call)))
    kinds = "a string, Chunks, a Call or a list of Calls, a Reply, a ModelResponse or an exception"
    raise UsageError(f"unsupported script step {step!r:.60}: a step is {kinds}")


class ScriptedModel:
    """A model that answers from a script, one step per request.

    Steps: a string (a text reply), :class:`Chunks` (a streamed reply), :class:`Call` or a
    list of calls (tool calls), :class:`Reply` (all of it; with ``error=``, a stream that
    fails after its chunks), a ``ModelResponse``, or an exception instance (raised by that
    request). Every request is recorded in
    :attr:`requests`. Running past the last step raises :class:`ScriptExhausted`.
    """

    def __init__(self, steps: Iterable[Step], *, name: str = "scripted") -> None:
        self._steps = [
            _to_reply(s) for s in listed(steps, what="ScriptedModel steps", example="ScriptedModel(['Hi!'])")
        ]
        self._next = 0
        self._name = name
        self.requests: list[ModelRequest] = []

    @property
    def name(self) -> str:
        """The model's name."""
        return f"test:{self._name}"

    def __repr__(self) -> str:
        return f"ScriptedModel({self._name!r}, step {self._next}/{len(self._steps)})"

    @property
    def remaining(self) -> int:
        """Steps not used yet."""
        return len(self._steps) - self._next

    def assert_complete(self) -> None:
        """Fail unless every step of the script was used."""
        if self._next != len(self._steps):
            raise AssertionError(f"{self!r}: {self.remaining} scripted step(s) never requested")

    def _take(self, request: ModelRequest, *, streaming: bool = False) -> Reply | ModelResponse:
        self.requests.append(request)
        if self._next >= len(self._steps):
            last = request.messages[-1].text[:80] if request.messages else ""
            raise ScriptExhausted(
                f"{self.name}: script exhausted after {len(self._steps)} step(s); request {len(self.requests)} "
                f"had {len(request.messages)} message(s), last: {last!r}"
            )
        step = self._steps[self._next]
        self._next += 1
        if isinstance(step, BaseException):
            raise _failed(step)
        if isinstance(step, Reply) and step.error is not None and not streaming:
            raise _failed(step.error, step)
        return step

    @staticmethod
    def _response(reply: Reply | ModelResponse, counter: int) -> ModelResponse:
        if isinstance(reply, ModelResponse):
            return reply
        text = "".join(reply.text.chunks) if isinstance(reply.text, Chunks) else reply.text
        parts: list[Part] = [TextPart(text)] if text else []
        for i, c in enumerate(reply.calls):
            parts.append(
                ToolCallPart(
                    c.id or f"call_{counter}_{i}", c.name, dict(c.arguments), c.raw_arguments, c.argument_error
                )
            )
        stop = reply.stop_reason or ("tool_calls" if reply.calls else "end")
        return ModelResponse(tuple(parts), reply.usage, stop, "scripted")  # type: ignore[arg-type]

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Answer with the next step."""

        async def once(_: int) -> ModelResponse:
            return self._response(self._take(request), self._next)

        return await traced_model_call(self.name, 1, once)  # type: ignore[no-any-return]

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        """Stream the next step (chunks one by one), then the full response."""
        return traced_model_stream(self.name, 1, _counted_when_left(self._stream(request)))

    async def _stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        reply = self._take(request, streaming=True)
        if isinstance(reply, Reply):
            chunks = reply.text.chunks if isinstance(reply.text, Chunks) else ((reply.text,) if reply.text else ())
            for ch in chunks:
                yield ModelTextDelta(ch)
            if reply.error is not None:  # dropped mid-answer: the chunks went out, no response follows
                raise _failed(reply.error, reply)
        else:
            if reply.text:
                yield ModelTextDelta(reply.text)
        yield self._response(reply, self._next)


FunctionResult = Union[str, Reply, ModelResponse]
_RETURNS = "return a string, a Reply or a ModelResponse (or raise)"


class FunctionModel:
    """A model whose replies come from a function of the request (sync or async).

    The function returns a string, a :class:`Reply` (``error=`` included: the reply fails
    part-way, as a :class:`ScriptedModel` step does) or a ``ModelResponse``, or raises.
    An async function cut off by a cancellation (a run's time limit) counts as a request
    sent, :data:`CUT_USAGE`, as a real adapter counts one it was waiting on.
    """

    def __init__(
        self, fn: Callable[[ModelRequest], FunctionResult | Awaitable[FunctionResult]], *, name: str = "function"
    ) -> None:
        if not callable(fn):
            raise UsageError(
                f"FunctionModel takes a function of the request, e.g. FunctionModel(lambda r: 'Hi!'), got {fn!r:.60}"
            )
        self._fn = fn
        self._name = name
        self.requests: list[ModelRequest] = []

    @property
    def name(self) -> str:
        """The model's name."""
        return f"test:{self._name}"

    async def _call(self, request: ModelRequest, *, streaming: bool = False) -> Reply | ModelResponse:
        self.requests.append(request)
        try:
            out = self._fn(request)
            if inspect.isawaitable(out):
                out = await out
        except Exception as exc:  # the function's failure is the request's, as a scripted exception
            _failed(exc)
            raise
        except anyio.get_cancelled_exc_class():  # cut off waiting for the answer: sent, as a real adapter counts it
            spent_when_cut(CUT_USAGE)
            raise
        try:
            reply = _to_reply(out)  # type: ignore[arg-type]
        except UsageError:  # the function's answer, not a script step: say so
            raise UsageError(f"FunctionModel {self._name!r}: the function returned {out!r:.60}; {_RETURNS}") from None
        if isinstance(reply, BaseException):
            raise _failed(reply)
        if isinstance(reply, Reply) and reply.error is not None and not streaming:
            raise _failed(reply.error, reply)  # as ScriptedModel: a plain request of a failing reply raises at once
        return reply

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Answer with the function's reply."""

        async def once(_: int) -> ModelResponse:
            return ScriptedModel._response(await self._call(request), len(self.requests))

        return await traced_model_call(self.name, 1, once)  # type: ignore[no-any-return]

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        """Stream the function's reply."""
        return traced_model_stream(self.name, 1, _counted_when_left(self._stream(request)))

    async def _stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        reply = await self._call(request, streaming=True)
        if isinstance(reply, Reply) and (isinstance(reply.text, Chunks) or reply.error is not None):
            chunks = reply.text.chunks if isinstance(reply.text, Chunks) else ((reply.text,) if reply.text else ())
            for ch in chunks:
                yield ModelTextDelta(ch)
            if reply.error is not None:  # dropped mid-answer: the chunks went out, no response follows
                raise _failed(reply.error, reply)
        else:
            resp = ScriptedModel._response(reply, len(self.requests))
            if resp.text:
                yield ModelTextDelta(resp.text)
        yield ScriptedModel._response(reply, len(self.requests))


async def _counted_when_left(items: AsyncIterator[ModelStreamItem]) -> AsyncIterator[ModelStreamItem]:
    """``items``; closed by its consumer mid-answer, the request counts as sent, as an adapter counts it.

    The stream of a real adapter reports a request its consumer left at a text delta (its
    response never read) as one a cancellation cut off: :data:`CUT_USAGE`.
    """
    async with aclosing(items):
        async for item in items:
            try:
                yield item
            except GeneratorExit:
                if isinstance(item, ModelTextDelta):
                    spent_when_cut(CUT_USAGE)
                raise


class RecordedSleeps:
    """A ``sleep`` for :class:`~jeeves_router.recovery.Recovery` that records each backoff instead of waiting.

    ``Recovery(sleep=RecordedSleeps())`` keeps a test of retries instant and lets it assert
    the delays the ladder chose. It returns at once, without yielding to the event loop, so
    the order of events in a test is the same on every run.

    Example:
        >>> import anyio
        >>> from jeeves_router.testing import RecordedSleeps
        >>> sleeps = RecordedSleeps()
        >>> anyio.run(sleeps, 0.5)
        >>> sleeps.delays
        [0.5]

    Attributes:
        delays: The delays asked for, in seconds, in order.
    """

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        """Record ``delay`` (seconds) and return at once."""
        self.delays.append(delay)


async def capture_events(agent: Any, prompt: str, **kwargs: Any) -> list[Event]:
    """Stream ``agent`` on ``prompt`` and return every event (a failed run raises, like ``run()``)."""
    if not callable(getattr(agent, "stream", None)):
        raise UsageError(f"capture_events takes an Agent first, then the prompt; got {type(agent).__name__}")
    events: list[Event] = []
    async with agent.stream(prompt, **kwargs) as stream:
        async for ev in stream:
            events.append(ev)
    return events
