"""Names a package exports but imports on first use, so that importing it stays cheap.

A package whose subsystems are not needed to import it (capabilities, handoffs, the
recovery mechanics, the LLM classifier...) lists them in a table and installs the module
``__getattr__`` and ``__dir__`` this returns. Each name is imported once, on first access,
and then kept in the package's namespace. The package repeats the same imports under
``if TYPE_CHECKING:`` so type checkers and the layering test see the real names::

    from typing import TYPE_CHECKING

    from .._lazy import lazy_exports

    if TYPE_CHECKING:
        from .llm import LLMClassifier

    __getattr__, __dir__ = lazy_exports(__name__, {".llm": ("LLMClassifier",)})
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping
from importlib import import_module

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, *tables: Mapping[str, Iterable[str]]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """Build a package's module-level ``__getattr__`` and ``__dir__`` for lazy names.

    Args:
        package: The package's ``__name__``.
        *tables: Module name (absolute, or relative to ``package`` with a leading dot) to
            the names it provides; several tables may name the same module.

    Returns:
        ``(__getattr__, __dir__)`` to assign at the package's top level.

    Raises:
        ValueError: If a name is listed under two modules.
    """
    table: dict[str, str] = {}
    for module, names in (item for t in tables for item in t.items()):
        for name in names:
            if name in table:
                raise ValueError(f"{package}: lazy name {name!r} listed twice")
            table[name] = module

    def __getattr__(name: str) -> object:
        module = table.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(module, package), name)
        setattr(sys.modules[package], name, value)  # later accesses skip this hook
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *table})

    return __getattr__, __dir__
