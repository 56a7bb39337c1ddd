"""Frozen, slotted dataclasses with a cheaper constructor (the data objects of a run).

A frozen dataclass's generated ``__init__`` stores every field with
``object.__setattr__(self, "name", value)``: a method lookup, a type lookup of the name
and a call, per field. A run builds a few dozen such objects (events, messages,
results), so this is a measurable share of its cost.

``@frozen`` makes ``@dataclass(frozen=True, slots=True)`` classes whose ``__init__`` has
the same signature and the same effect but stores each field through the field's slot
descriptor, bound once, and builds ``dict`` and ``list`` defaults inline. Everything else
(frozenness, ``==``, ``repr``, ``hash``, ``match``, :func:`dataclasses.fields`,
:func:`dataclasses.replace`, pickling, pydantic) is the dataclass's own and unchanged. The
``__init__`` is generated once, in place of the dataclass's (import costs the same).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from types import MemberDescriptorType
from typing import TYPE_CHECKING, Any, TypeVar, overload

if TYPE_CHECKING:
    from typing_extensions import dataclass_transform
else:
    try:
        from typing import dataclass_transform
    except ImportError:  # Python 3.10: only type checkers need it

        def dataclass_transform(**_: Any) -> Any:
            return lambda decorator: decorator


__all__ = ["frozen"]

_T = TypeVar("_T")


class _Factory:
    """The default of a field with a default factory (shown as ``<factory>``, as dataclasses do)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()

#: Factories whose call is replaced by a literal in the generated code.
_LITERALS: dict[Any, str] = {dict: "{}", list: "[]"}


@overload
def frozen(cls: type[_T], /) -> type[_T]: ...


@overload
def frozen(*, kw_only: bool = False) -> Callable[[type[_T]], type[_T]]: ...


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field, dataclasses.Field))
def frozen(cls: type[_T] | None = None, /, *, kw_only: bool = False) -> Any:
    """Make ``cls`` a frozen, slotted dataclass with a cheaper ``__init__``.

    ``@frozen`` is ``@dataclass(frozen=True, slots=True)`` and ``@frozen(kw_only=True)``
    is ``@dataclass(frozen=True, slots=True, kw_only=True)`` (see the module docstring).

    Args:
        cls: The class (when used as ``@frozen`` without arguments).
        kw_only: Make every field keyword-only.

    Returns:
        The dataclass, or a decorator that makes one.

    Raises:
        TypeError: ``cls`` defines ``__post_init__`` or has ``InitVar`` or ``init=False``
            fields (not supported).
    """

    def make(cls: type[_T]) -> type[_T]:
        documented = bool(cls.__doc__)
        made: Any = dataclasses.dataclass(frozen=True, slots=True, kw_only=kw_only, init=False)(cls)
        type.__setattr__(made, "__init__", _build(made))
        if not documented:  # the docstring dataclasses would have made from the signature
            made.__doc__ = made.__name__ + str(inspect.signature(made)).replace(" -> None", "")
        return made  # type: ignore[no-any-return]

    return make if cls is None else make(cls)


def _slot_setter(cls: type, name: str) -> Any:
    """The ``__set__`` of the slot descriptor that stores field ``name`` of ``cls``."""
    for klass in cls.__mro__:
        if name in klass.__dict__:
            descriptor = klass.__dict__[name]
            if isinstance(descriptor, MemberDescriptorType):
                return descriptor.__set__
            break
    raise TypeError(f"{cls.__qualname__}.{name} is not stored in a slot")


def _build(cls: type) -> Any:
    """Generate the ``__init__`` of the dataclass ``cls`` (the parameters dataclasses would give it)."""
    fields = dataclasses.fields(cls)
    if (
        hasattr(cls, "__post_init__")
        or len(fields) != len(cls.__dataclass_fields__)  # type: ignore[attr-defined]
        or not all(f.init for f in fields)
    ):
        raise TypeError(f"{cls.__qualname__}: __post_init__, InitVar and init=False are not supported")
    if any(f.name == "self" or f.name.startswith("_jr_") for f in fields):
        raise TypeError(f"{cls.__qualname__}: a field name clashes with the generated __init__")
    annotations: dict[str, Any] = {}
    ns: dict[str, Any] = {"__name__": cls.__module__, "_jr_factory": _FACTORY}
    positional: list[str] = []
    keyword: list[str] = []
    body: list[str] = []
    for i, f in enumerate(fields):
        name = f.name
        annotations[name] = f.type
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
    init.__annotations__ = {**annotations, "return": None}
    init.__doc__ = None
    return init
