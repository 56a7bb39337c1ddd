"""Cheaper constructors for frozen, slotted dataclasses (the data objects of a run).

A frozen dataclass's generated ``__init__`` stores every field with
``object.__setattr__(self, "name", value)``: a method lookup, a type lookup of the name
and a call, per field. A run builds a few dozen such objects (events, messages,
results), so this is a measurable share of its cost.

:func:`fast_init` gives a frozen, slotted dataclass an ``__init__`` with the same
signature and the same effect that stores each field through the field's slot
descriptor, bound once, and builds ``dict`` and ``list`` defaults inline. Everything else
(frozenness, ``==``, ``repr``, ``hash``, ``match``, :func:`dataclasses.fields`,
:func:`dataclasses.replace`, pickling, pydantic) is the dataclass's own and unchanged.
The new ``__init__`` is generated when the class is first constructed, so importing a
module pays nothing for it.
"""

from __future__ import annotations

import dataclasses
import functools
from types import MemberDescriptorType
from typing import Any, TypeVar

__all__ = ["fast_init"]

_T = TypeVar("_T")


class _Factory:
    """The default of a field with a default factory (shown as ``<factory>``, as dataclasses do)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()

#: Factories whose call is replaced by a literal in the generated code.
_LITERALS: dict[Any, str] = {dict: "{}", list: "[]"}


def fast_init(cls: type[_T]) -> type[_T]:
    """Give the frozen, slotted dataclass ``cls`` a cheaper ``__init__`` (see the module docstring).

    Apply it above ``@dataclass(frozen=True, slots=True, ...)``.

    Args:
        cls: A frozen dataclass made with ``slots=True``, without ``__post_init__``,
            ``InitVar`` or ``init=False`` fields.

    Returns:
        ``cls``, whose ``__init__`` is built on its first construction.

    Raises:
        TypeError: ``cls`` is not such a dataclass.
    """
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or "__slots__" not in cls.__dict__:
        raise TypeError(f"{cls.__qualname__} is not a frozen dataclass with slots=True")
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    if (
        hasattr(cls, "__post_init__")
        or len(fields) != len(cls.__dataclass_fields__)  # type: ignore[attr-defined]
        or not all(f.init for f in fields)
    ):
        raise TypeError(f"{cls.__qualname__}: __post_init__, InitVar and init=False are not supported")
    if any(f.name == "self" or f.name.startswith("_jr_") for f in fields):
        raise TypeError(f"{cls.__qualname__}: a field name clashes with the generated __init__")
    original = cls.__dict__["__init__"]

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        init = _build(cls, original)
        type.__setattr__(cls, "__init__", init)
        init(self, *args, **kwargs)

    functools.update_wrapper(__init__, original)  # signature and annotations of the real one
    type.__setattr__(cls, "__init__", __init__)
    return cls


def _slot_setter(cls: type, name: str) -> Any:
    """The ``__set__`` of the slot descriptor that stores field ``name`` of ``cls``."""
    for klass in cls.__mro__:
        if name in klass.__dict__:
            descriptor = klass.__dict__[name]
            if isinstance(descriptor, MemberDescriptorType):
                return descriptor.__set__
            break
    raise TypeError(f"{cls.__qualname__}.{name} is not stored in a slot")


def _build(cls: type, original: Any) -> Any:
    """Generate the ``__init__`` of ``cls`` (same parameters as ``original``, the dataclass's)."""
    ns: dict[str, Any] = {"__name__": cls.__module__, "_jr_factory": _FACTORY}
    positional: list[str] = []
    keyword: list[str] = []
    body: list[str] = []
    for i, f in enumerate(dataclasses.fields(cls)):
        name = f.name
        ns[f"_jr_set{i}"] = _slot_setter(cls, name)
        value = name
        if f.default is not dataclasses.MISSING:
            ns[f"_jr_default{i}"] = f.default
            param = f"{name}=_jr_default{i}"
        elif f.default_factory is not dataclasses.MISSING:
            make = _LITERALS.get(f.default_factory)
            if make is None:
                ns[f"_jr_factory{i}"] = f.default_factory
                make = f"_jr_factory{i}()"
            param = f"{name}=_jr_factory"
            value = f"{make} if {name} is _jr_factory else {name}"
        else:
            param = name
        (keyword if f.kw_only else positional).append(param)
        body.append(f"    _jr_set{i}(self, {value})")
    params = ["self", *positional, *(["*", *keyword] if keyword else [])]
    source = f"def __init__({', '.join(params)}):\n" + ("\n".join(body) or "    pass") + "\n"
    exec(source, ns)  # built from field names only, as dataclasses does
    init = ns["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__annotations__ = dict(original.__annotations__)
    init.__doc__ = original.__doc__
    return init
