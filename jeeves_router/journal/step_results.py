"""Step results in a journal: any value a step returns, written as JSON and rebuilt with its type.

Tuples, dataclasses and pydantic models keep their types (tagged with ``$`` keys); a type
defined outside ``jeeves_router`` is rebuilt only once registered (:func:`register_step_type`)
or seen being written in this process, so a journal never imports what it names.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import is_dataclass
from typing import Any

from pydantic import BaseModel, TypeAdapter

from ..errors import UsageError
from .records import JournalError, to_json

__all__ = ["decode_result", "encode_result", "register_step_type"]

_JSON_TAG = "json"
_TYPE, _VALUE, _TUPLE, _DICT = "$type", "$value", "$tuple", "$dict"
_registered: dict[str, type[Any]] = {}


def _tag(cls: type[Any]) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def register_step_type(cls: type[Any]) -> type[Any]:
    """Allow results of type ``cls`` (a dataclass or pydantic model) to be replayed.

    Types defined in ``jeeves_router`` are allowed without registration. Usable as a
    class decorator.
    """
    if not (is_dataclass(cls) or (isinstance(cls, type) and issubclass(cls, BaseModel))):
        raise UsageError(f"register_step_type needs a dataclass or pydantic model, got {cls!r}")
    _registered[_tag(cls)] = cls
    return cls


_adapters: dict[type[Any], TypeAdapter[Any]] = {}


def _adapter(cls: type[Any]) -> TypeAdapter[Any]:
    found = _adapters.get(cls)
    if found is None:
        found = _adapters[cls] = TypeAdapter(cls)
    return found


def _remember(cls: type[Any]) -> str:
    tag = _tag(cls)
    if tag not in _registered and not cls.__module__.startswith("jeeves_router."):
        _registered[tag] = cls
    return tag


def _encode(value: Any) -> Any:
    """JSON that keeps the types of tuples, dataclasses and pydantic models (tagged with ``$``)."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, list):
        return [_encode(v) for v in value]
    if isinstance(value, tuple):
        return {_TUPLE: [_encode(v) for v in value]}
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise UsageError(f"cannot journal a mapping with a non-string key {k!r}")
            out[k] = _encode(v)
        return {_DICT: out} if any(k.startswith("$") for k in out) else out
    if is_dataclass(value) or isinstance(value, BaseModel):
        cls = type(value)
        return {_TYPE: _remember(cls), _VALUE: _adapter(cls).dump_python(value, mode="json")}
    return to_json(value)


def _decode(data: Any) -> Any:
    if isinstance(data, list):
        return [_decode(v) for v in data]
    if isinstance(data, dict):
        if len(data) == 2 and _TYPE in data and _VALUE in data:
            return _adapter(_resolve(data[_TYPE])).validate_python(data[_VALUE])
        if len(data) == 1 and _TUPLE in data:
            return tuple(_decode(v) for v in data[_TUPLE])
        if len(data) == 1 and _DICT in data:
            return {k: _decode(v) for k, v in data[_DICT].items()}
        return {k: _decode(v) for k, v in data.items()}
    return data


def encode_result(value: Any) -> tuple[str, Any]:
    """``(type tag, JSON data)`` for a step result.

    A dataclass or pydantic model is tagged with its type; anything else is stored as JSON
    whose tuples, dataclasses and models (at any depth) carry ``$`` tags, so a replayed
    result has the types the live one had.
    """
    if (is_dataclass(value) and not isinstance(value, type)) or isinstance(value, BaseModel):
        cls = type(value)
        return _remember(cls), _adapter(cls).dump_python(value, mode="json")
    return _JSON_TAG, _encode(value)


def _resolve(tag: str) -> type[Any]:
    cls = _registered.get(tag)
    if cls is not None:
        return cls
    module, _, qualname = tag.partition(":")
    if not module.startswith("jeeves_router.") or not all(p.isidentifier() for p in qualname.split(".")):
        raise JournalError(
            f"step result type {tag!r} is not registered: call register_step_type() for it before replaying"
        )
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    if not isinstance(obj, type) or not (is_dataclass(obj) or issubclass(obj, BaseModel)):
        raise JournalError(f"step result type {tag!r} is not a dataclass or pydantic model")
    _registered[tag] = obj
    return obj


def decode_result(tag: str, data: Any) -> Any:
    """Rebuild a step result from :func:`encode_result`'s output."""
    if tag == _JSON_TAG:
        return _decode(data)
    return _adapter(_resolve(tag)).validate_python(data)
