"""Helpers shared by the provider adapters: SDK import guard, tool arguments, secrets."""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping
from types import ModuleType
from typing import Any

from ..errors import UsageError
from ..messages import ToolCallPart

__all__ = ["import_sdk", "tool_call_part", "arguments_json", "secret_repr"]


def import_sdk(module: str, extra: str) -> ModuleType:
    """Import a provider SDK or raise a :class:`UsageError` naming the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise UsageError(
            f"the {module!r} package is not installed; install it with: pip install 'jeeves-router[{extra}]'"
        ) from exc


def tool_call_part(call_id: str, name: str, raw: str | None) -> ToolCallPart:
    """A :class:`ToolCallPart` from the model's raw argument text.

    Empty text means no arguments. Text that is not a JSON object keeps the arguments
    empty and sets ``argument_error``, so the tool is not called and the model is told
    what was wrong, instead of the call silently running with ``{}``.
    """
    text = raw or ""
    if not text.strip():
        return ToolCallPart(call_id, name, {}, raw_arguments=text)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        error = f"the arguments of tool {name!r} are not valid JSON ({exc.msg} at position {exc.pos})"
        return ToolCallPart(call_id, name, {}, raw_arguments=text, argument_error=error)
    if not isinstance(value, Mapping):
        error = f"the arguments of tool {name!r} must be a JSON object, got {type(value).__name__}"
        return ToolCallPart(call_id, name, {}, raw_arguments=text, argument_error=error)
    return ToolCallPart(call_id, name, dict(value), raw_arguments=text)


def arguments_json(part: ToolCallPart) -> str:
    """The argument text to send back to the provider for an earlier tool call."""
    if part.raw_arguments is not None and (part.argument_error is not None or part.raw_arguments.strip()):
        return part.raw_arguments
    return json.dumps(dict(part.arguments), ensure_ascii=False, separators=(",", ":"))


def secret_repr(cls_name: str, **fields: Any) -> str:
    """``Cls(a=..., b=...)`` from fields that are known to hold no secret."""
    inner = ", ".join(f"{k}={v!r}" for k, v in fields.items() if v is not None)
    return f"{cls_name}({inner})"
