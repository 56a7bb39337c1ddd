"""A secret a command reads from an environment variable it is told the name of.

A secret given as a command-line argument is visible to every user of the machine (``ps``);
``--token-env VAR`` (``serve``, ``mcp``) and ``--key-env VAR`` (``replay``, ``trace``) name
the variable instead.
"""

from __future__ import annotations

import os

from .errors import UsageError

__all__ = ["secret_from_env"]


def secret_from_env(name: str | None, *, option: str) -> str | None:
    """The value of environment variable ``name`` (``None`` when no name is given).

    Args:
        name: The variable's name.
        option: The option that named it, for the message (``--token-env``).

    Raises:
        UsageError: if the variable is unset or empty.
    """
    if name is None:
        return None
    value = os.environ.get(name, "")
    if not value:
        raise UsageError(f"{option} {name}: the environment variable is unset or empty")
    return value
