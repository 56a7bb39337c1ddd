"""Checks of constructor arguments that take several things: a list given a single one is named."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .errors import UsageError

__all__ = ["listed"]


def listed(items: object, *, what: str, example: str) -> list[Any]:
    """The items of ``items``, a list (or any iterable that is not a string or a mapping).

    Args:
        items: What the caller passed.
        what: The argument's name, for the message (``tools``, ``routes``).
        example: The call to show, e.g. ``tools=[lookup_invoice]``.

    Raises:
        UsageError: for one object in a list's place (a tool, a route, an agent) or a string,
            naming it and how to pass it.
    """
    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
        name = getattr(items, "name", None)
        shown = f"{type(items).__name__} {name!r}" if isinstance(name, str) else repr(items)
        raise UsageError(f"{what} must be a list, got {shown[:120]}: pass a list even of one, {example}")
    return list(items)
