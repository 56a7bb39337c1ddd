"""Idempotency keys of tool calls: stable across replays, resumes and DBOS recoveries."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["current_idempotency_key", "idempotency_scope"]

_IDEMPOTENCY_KEY: ContextVar[str | None] = ContextVar("jeeves_idempotency_key", default=None)


def current_idempotency_key() -> str | None:
    """The idempotency key of the tool call being performed (``None`` outside one).

    A tool that changes the world (a payment, an email) can pass it to the remote system
    to make a repeated call harmless. It is the same on every attempt of the same call.
    Sync tools run in a worker thread and see it too (the context is copied).
    """
    return _IDEMPOTENCY_KEY.get()


@contextmanager
def idempotency_scope(key: str) -> Iterator[None]:
    """Set :func:`current_idempotency_key` for the duration of a step."""
    token = _IDEMPOTENCY_KEY.set(key)
    try:
        yield
    finally:
        _IDEMPOTENCY_KEY.reset(token)
