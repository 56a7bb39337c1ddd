"""What DBOS keeps of a failed run's error, and how a caller gets it back (:mod:`jeeves_router.durable.dbos`).

DBOS stores a failed workflow's error in its system database by its type's name and message
(and a ``metadata``-like attribute). The workflow raises :func:`kept_error`'s stand-in instead of
the run's exception, so that database holds the message only where the one rule for an
exception's text (:mod:`jeeves_router._shown`) shows it; :func:`run_errors` raises it again, to
whoever waits for the run, as its :mod:`jeeves_router.errors` type.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from dbos._serialization import PortableWorkflowError

from .. import errors
from .._shown import shown_message
from ..errors import ToolError
from ..recovery.classify import is_exposed

__all__ = ["KeptError", "kept_error", "run_errors"]


class KeptError(Exception):
    """A failed run's error as its workflow raises it to DBOS: named after its type, with the message shown."""


_KEPT: dict[str, type[KeptError]] = {}


def kept_error(exc: Exception) -> KeptError:
    """``exc`` as DBOS may keep it in its system database: its type's name, its message only where it was shown.

    DBOS stores a failed workflow's error by its type's name and ``str()`` (and a ``metadata``
    -like attribute) in its own database, where a message quoting a secret would stay. So the
    workflow raises a stand-in of the same name whose message is what :mod:`jeeves_router._shown`
    lets out: the message only when a ladder under ``Recovery(expose_details=True)`` judged the
    error (as a journal's records keep it), or when it is a :class:`~jeeves_router.errors.ToolError`
    (a message written to be shown, as a tool result shows it; e.g. ``ToolOutcomeUnknown``'s, which
    says what to do); else a sentence naming the type and the setting that keeps its message.
    """
    name = type(exc).__name__
    kept = _KEPT.get(name)
    if kept is None:  # one class per error type's name (DBOS names the error by its class)
        kept = _KEPT[name] = type(name, (KeptError,), {"__module__": __name__})
    shown = is_exposed(exc) or isinstance(exc, ToolError)
    message = shown_message(exc, expose_details=shown, limit=100_000)
    return kept(
        message or f"{name}; its message is not kept (it may quote a secret): Recovery(expose_details=True) keeps it"
    )


@contextmanager
def run_errors() -> Iterator[None]:
    """Raise a failed run's error as its jeeves_router type (DBOS returns a ``PortableWorkflowError`` naming it)."""
    try:
        yield
    except PortableWorkflowError as exc:
        cls = getattr(errors, exc.name, None) if exc.name in errors.__all__ else None
        if not (isinstance(cls, type) and issubclass(cls, errors.JeevesError)):
            raise
        try:
            rebuilt = cls(exc.message)
        except Exception:  # an error type whose constructor wants more than a message
            raise exc from None
        raise rebuilt from exc
