"""Small async helpers, and the one path a run's events take to their consumer.

A run is a chain of plain coroutines (root run, router, specialist run, tool loop...). Each
event is sent with ``await emit(event)``: the event travels up the coroutine chain as a
single yielded value, straight to the nearest :class:`EventPump`, which hands it to the
consumer and resumes the run when the next event is asked for. No layer re-yields the
events of the layer below it, and an in-flight run holds one frame per layer (no async
generator, no ``asend`` object, no finaliser weak reference per layer).

Waits of the run (sleeps, sockets, locks) are yielded to the event loop unchanged, so the
run stays cancellable at every await point and runs in the consumer's task, as a chain
of async generators would.
"""

from __future__ import annotations

import sys
import types
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Generator
from contextlib import AbstractContextManager
from contextvars import ContextVar
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

__all__ = ["EventPump", "aclose", "aclosing", "closing", "each_within", "emit"]

#: True while a consumer closes a run (``aclose()``, ``break`` out of ``async with``): its cleanups run then.
_CLOSING: ContextVar[bool] = ContextVar("jeeves_router_closing", default=False)


def closing() -> bool:
    """Whether the code running now is a run's clean-up, run because its consumer closed it.

    A failure then (a model stream whose close raises) is not reported as events: nobody reads
    them any more. It ends the close instead, as an async generator's ``aclose()`` would.
    """
    return _CLOSING.get()


T = TypeVar("T")


class aclosing(Generic[T]):
    """Like :func:`contextlib.aclosing`, typed for any async iterator with an ``aclose``.

    On exit the iterator's ``aclose()`` is awaited (if it has one), so nested async
    generators are finalised in order, in the task that runs them.
    """

    __slots__ = ("_it",)

    def __init__(self, it: AsyncIterator[T]) -> None:
        self._it = it

    async def __aenter__(self) -> AsyncIterator[T]:
        return self._it

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        aclose = getattr(self._it, "aclose", None)
        if aclose is not None:
            await aclose()


def aclose(it: AsyncIterator[T]) -> Awaitable[None]:
    """The awaitable that closes ``it``: its own ``aclose()`` if it has one, else one that does nothing.

    For the hot paths of a run: ``try: ... finally: await aclose(it)`` does what
    ``async with aclosing(it)`` does without keeping a context-manager object alive for
    the whole run (fewer GC-tracked objects per in-flight run). The iterator's own
    ``aclose()`` is returned, not wrapped in a coroutine of this function's.
    """
    close = getattr(it, "aclose", None)
    return close() if close is not None else _nothing()  # type: ignore[no-any-return]


async def _nothing() -> None:
    """An awaitable that does nothing (:func:`aclose` of an iterator without ``aclose``)."""


async def each_within(it: AsyncIterator[T], scope: Callable[[], AbstractContextManager[object]]) -> AsyncIterator[T]:
    """The items of ``it``, each wait for the next one inside a fresh ``scope()`` (a deadline, say).

    A cancel scope must never stay open across a ``yield`` to the consumer: the consumer's
    own code would then run inside it (a timeout firing there cancels the wrong code, and
    leaving the scope out of order breaks anyio's scope stack). Here a scope is entered and
    left within one ``__anext__`` of ``it``, and the item is yielded after it is left. So a
    timeout bounds the wait for each next item (a stalled stream is cut), never what the
    consumer does with an item. ``it`` is closed with this iterator (``break``, ``aclose()``).
    """
    try:
        while True:
            with scope():
                try:
                    item = await it.__anext__()
                except StopAsyncIteration:
                    return
            yield item
    finally:
        await aclose(it)


@types.coroutine
def emit(item: Any) -> Generator[Any, None, None]:
    """Send ``item`` to the consumer of the enclosing :class:`EventPump`; awaited by the sender.

    The item travels up the coroutine chain as a yielded value; the pump recognises it by
    its type (the pump's ``kind``) and hands it over. The await returns once the consumer
    asks for the next item. Only valid in a coroutine driven by an :class:`EventPump`; an
    exception thrown into the pump (cancellation, or :class:`RunClosed` from
    :meth:`EventPump.aclose`) is raised at this await.
    """
    yield item


_END: Any = object()  # EventPump._thrown: the coroutine ended
# Asked of an EventPump while another task waits inside it for its next item (state 3).
_BUSY = (
    "{} this stream was asked for while another task is reading it (it waits inside the run); "
    "one task reads a stream at a time: to stop the run, cancel the reading task or let it leave "
    "its loop, then close the stream"
)


class EventPump(Generic[T]):
    """The items a coroutine emits with :func:`emit`, as an async iterator.

    ``await pump.__anext__()`` runs the coroutine until its next ``emit`` of an instance
    of ``kind`` (which it returns) or its end (``StopAsyncIteration``); everything else the
    coroutine yields is a wait, passed through to the event loop. An exception of the
    coroutine is raised from it (and kept in :attr:`error`). :meth:`aclose` stops the
    coroutine at its current await point, running its ``finally`` blocks, which may await.

    Args:
        coro: The coroutine to drive.
        kind: The type of the emitted items.

    Attributes:
        error: The exception the coroutine ended with (``None`` while it has not failed).
    """

    __slots__ = ("__weakref__", "_coro", "_kind", "_state", "error")  # weakref: the event loop's finaliser set

    # _state: 0 never iterated, 1 running (suspended at an await), 2 done, 3 a task is waiting
    # inside a step (its wait passed to the event loop): no other task may step or close it.
    # Literal ints in the hot path: a class-attribute lookup per step costs more than the step's own work.

    def __init__(self, coro: Coroutine[Any, Any, None], kind: type[T]) -> None:
        self._coro = coro
        self._kind = kind
        self._state = 0
        self.error: BaseException | None = None

    def __aiter__(self) -> EventPump[T]:
        return self

    if TYPE_CHECKING:

        def __anext__(self) -> Awaitable[T]:
            """The next item."""
            ...

        def drain(self) -> Awaitable[None]:
            """Run the coroutine to its end, discarding its items (``await pump.drain()``)."""
            ...

    else:

        @types.coroutine
        def __anext__(self):
            """The next item.

            A generator-based awaitable, itself the awaitable ``async for`` waits on (no
            wrapper call per item): a step costs no Python call and raises no exception.
            """
            if self._state != 1:  # the first item, none left, or another task is stepping it
                if self._state == 2:
                    raise StopAsyncIteration
                if self._state == 3:
                    raise RuntimeError(_BUSY.format("an event of"))
                self._state = 1
            try:
                out = self._coro.send(None)
            except StopIteration:
                self._state = 2
                raise StopAsyncIteration from None
            except BaseException as failure:
                self._failed(failure)
                raise
            while not isinstance(out, self._kind):
                self._state = 3
                try:  # a wait for the event loop, passed through; its answer goes back in
                    value = yield out
                except BaseException as thrown:  # e.g. cancellation: raised at the run's await point
                    self._state = 1
                    out = yield from self._thrown(thrown)
                    if out is _END:
                        raise StopAsyncIteration from None
                    return out
                self._state = 1
                try:
                    out = self._coro.send(value)
                except StopIteration:
                    self._state = 2
                    raise StopAsyncIteration from None
                except BaseException as failure:
                    self._failed(failure)
                    raise
            return out

        @types.coroutine
        def drain(self):
            """Run the coroutine to its end, discarding its items (``await pump.drain()``).

            What ``async for _ in pump: pass`` does, in one step per wait instead of one per item.
            """
            if self._state == 2:
                return None
            if self._state == 3:
                raise RuntimeError(_BUSY.format("the rest of"))
            self._state = 1
            coro, kind = self._coro, self._kind
            value = None
            while True:
                try:
                    out = coro.send(value)
                except StopIteration:
                    self._state = 2
                    return None
                except BaseException as failure:
                    self._failed(failure)
                    raise
                if isinstance(out, kind):  # an item nobody reads: resume at once
                    value = None
                    continue
                self._state = 3
                try:
                    value = yield out
                except BaseException as thrown:
                    self._state = 1
                    if (yield from self._thrown(thrown)) is _END:
                        return None
                    value = None
                else:
                    self._state = 1

    def _failed(self, failure: BaseException) -> None:
        self._state = 2
        if isinstance(failure, Exception):
            self.error = failure

    @types.coroutine
    def _thrown(self, exc: BaseException) -> Generator[Any, Any, Any]:
        """Raise ``exc`` at the coroutine's await point; run it on to its next item (returned) or its end (``_END``).

        The rare path of a step (an exception thrown into the pump, e.g. a cancellation),
        kept out of the per-item loop so that loop only sends.
        """
        coro, kind = self._coro, self._kind
        while True:
            try:
                out = coro.throw(exc)
            except StopIteration:
                self._state = 2
                return _END
            except BaseException as failure:
                self._failed(failure)
                raise
            # The run took it (a cancel scope inside it caught it). Its traceback holds this frame,
            # and so the pump and the run's coroutine: kept by the run (the context of a later
            # exception), it would make a cycle that only the collector frees — which closes the
            # run's coroutines with GeneratorExit instead of letting :meth:`__del__` close it.
            exc.__traceback__ = None
            while not isinstance(out, kind):
                self._state = 3
                try:
                    value = yield out
                except BaseException as again:
                    self._state = 1
                    exc = again
                    break
                self._state = 1
                try:
                    out = coro.send(value)
                except StopIteration:
                    self._state = 2
                    return _END
                except BaseException as failure:
                    self._failed(failure)
                    raise
            else:
                return out

    async def aclose(self) -> None:
        """Stop the coroutine at its current await point; its ``finally`` blocks run (and may await).

        Raises:
            RuntimeError: another task is waiting inside the coroutine for its next item (as
                an async generator's ``aclose()`` refuses while it runs): cancel that task, or
                let it leave its loop, and close the iterator then.
        """
        if self._state == 3:
            raise RuntimeError(_BUSY.format("a close of"))
        state, self._state = self._state, 2
        if state == 0:
            self._coro.close()
        elif state == 1:
            await _finish(self._coro, self._kind)

    def __del__(self) -> None:
        if self._state == 0:  # never iterated: nothing ran, nothing to warn about
            self._coro.close()
        elif self._state != 2:
            # Dropped without aclose() while the run was suspended (e.g. `break` with no aclose):
            # let the event loop close it, as it finalises an abandoned async generator.
            finalizer = sys.get_asyncgen_hooks().finalizer
            try:
                if finalizer is not None:
                    finalizer(self)  # type: ignore[arg-type]  # asyncio's only calls aclose()
                    return
            except Exception:  # a loop whose finaliser needs a real async generator
                pass
            self._coro.close()


class RunClosed(BaseException):
    """Raised at a run's await point when its consumer closes it (:meth:`EventPump.aclose`).

    Not ``GeneratorExit``: thrown into a coroutine that awaits another, ``GeneratorExit`` makes
    Python *close* the inner one (``coroutine.close()``), and a clean-up there that awaits (an
    HTTP stream closing its response) then fails with ``RuntimeError: coroutine ignored
    GeneratorExit``. This exception is thrown down the chain like any other, so every
    ``finally`` block may await; async generators the run iterates still get ``GeneratorExit``
    from their ``aclose()``.
    """


@types.coroutine
def _finish(coro: Coroutine[Any, Any, None], kind: type) -> Generator[Any, Any, None]:
    """Throw :class:`RunClosed` into ``coro`` and drive it to its end, passing its waits through."""
    token = _CLOSING.set(True)
    try:
        out = coro.throw(RunClosed())
        while True:
            if isinstance(out, kind):
                coro.close()
                raise RuntimeError("a run emitted an event while it was being closed")
            try:
                value = yield out
            except BaseException as exc:  # cancelled while closing: the run sees it too
                out = coro.throw(exc)
            else:
                out = coro.send(value)
    except (RunClosed, GeneratorExit, StopIteration):
        return
    finally:
        _CLOSING.reset(token)
