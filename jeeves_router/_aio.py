"""Small async helpers."""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import TracebackType
from typing import Generic, TypeVar

__all__ = ["aclosing", "aclose"]

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


async def aclose(it: AsyncIterator[T]) -> None:
    """Await ``it.aclose()`` if it has one.

    For the hot paths of a run: ``try: ... finally: await aclose(it)`` does what
    ``async with aclosing(it)`` does without keeping a context-manager object alive for
    the whole run (fewer GC-tracked objects per in-flight run).
    """
    close = getattr(it, "aclose", None)
    if close is not None:
        await close()
