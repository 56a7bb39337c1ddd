"""Idempotency keys of tool calls, and what a resume does with a call whose outcome is unknown.

The keys are stable across replays, resumes and DBOS recoveries.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Literal

from .._log import get_logger
from ..tools import ToolOutcome
from .records import ToolOutcomeUnknown

if TYPE_CHECKING:
    from ..runtime import StepKey

__all__ = ["UnknownToolPolicy", "current_idempotency_key", "idempotency_scope", "unknown_outcome"]

log = get_logger(__name__)

UnknownToolPolicy = Literal["fail", "retry", "skip"]

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


def unknown_outcome(policy: UnknownToolPolicy, key: StepKey, idem: str) -> ToolOutcome | None:
    """Apply ``policy`` to a tool call that started before a crash and never recorded its outcome.

    Returns the outcome to give the model (``"skip"``), or ``None`` to call the tool again
    with the same idempotency key (``"retry"``).

    Raises:
        ToolOutcomeUnknown: under ``"fail"``.
    """
    log.warning("tool outcome unknown", session_id=key.session_id, tool=key.name, step=key.index, policy=policy)
    if policy == "fail":
        raise ToolOutcomeUnknown(
            f"{key.name} (step {key.index} of session {key.session_id!r}, idempotency key {idem!r}) started "
            "before a crash and its outcome is unknown; resume with on_unknown_tool_outcome='retry' to call "
            "it again or 'skip' to tell the model it is unknown",
            metadata={"tool": key.name, "step": key.index, "idempotency_key": idem},
        )
    if policy == "skip":
        return ToolOutcome(
            f"the outcome of this {key.name.removeprefix('tool:')} call is unknown (interrupted); it was not repeated",
            is_error=True,
        )
    return None
