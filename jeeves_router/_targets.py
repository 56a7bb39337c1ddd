"""Importing what a command names as ``module:attribute``: an agent, or a function that makes one.

``jeeves-router serve``, ``mcp`` and ``graph`` and their Python counterparts all read their
target through :func:`import_target` (and ``fit``/``eval --classifier`` theirs through
:func:`import_object`), so they accept the same forms and fail with the same messages.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from typing import Any

from .errors import UsageError

__all__ = ["import_object", "import_target"]


def import_object(spec: str, *, option: str, example: str) -> Any:
    """The object ``spec`` (``module:attribute``, the attribute dotted if nested) names, not called.

    Modules of the current directory are importable, as under ``python -m``.

    Raises:
        UsageError: naming ``option`` and ``spec``: a malformed spec or an import that failed.
    """
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise UsageError(f"{option} {spec!r}: expected module:attribute, e.g. {example}")
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:
        sys.path.insert(0, here)
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError, ValueError) as exc:
        raise UsageError(f"{option} {spec!r}: cannot import it ({exc})") from None
    return obj


def import_target(spec: str, *, option: str, example: str) -> Any:
    """The object ``spec`` (``module:attribute``, the attribute dotted if nested) names.

    Modules of the current directory are importable, as under ``python -m``. An attribute
    that is a function (or any callable that is not an agent) is called with no arguments and
    its result is the target; the caller checks what kind of object it must be.

    Args:
        spec: ``module:attribute``, e.g. ``examples.serve_desk:desk``.
        option: What the spec was given as (``TARGET``, ``AGENT``), for the messages.
        example: A spec to show in the message when ``spec`` is not of the right form.

    Raises:
        UsageError: naming ``option`` and ``spec``: a malformed spec, an import that failed, a
            function that needs arguments or raises.
    """
    from .agent import Agent  # an Agent is not called; imported here: this module stays light

    obj = import_object(spec, option=option, example=example)
    if isinstance(obj, Agent) or not callable(obj):
        return obj
    try:
        inspect.signature(obj).bind()
    except TypeError:
        raise UsageError(f"{option} {spec!r} needs arguments: name an agent or a function of no arguments") from None
    except ValueError:  # no signature (a builtin): let the call decide
        pass
    try:
        return obj()
    except Exception as exc:  # the user's factory failed: one message naming it, not a traceback
        raise UsageError(f"{option} {spec!r}: calling it failed ({type(exc).__name__}: {exc})") from exc
