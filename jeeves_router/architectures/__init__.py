"""Architectures: how an agent turns a request into an answer.

The engine core (:mod:`.base`) is imported with the package; each architecture is imported
on first use, so that using the tool loop never loads the Router, capabilities or handoffs.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports
from .base import Architecture, RunContext

if TYPE_CHECKING:
    from .capabilities.architecture import Capabilities, Capability
    from .handoffs.chain import HandoffChain
    from .react import ToolLoop
    from .router import HandoffRouter, Router, RouterRoute

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        ".capabilities.architecture": ("Capabilities", "Capability"),
        ".handoffs.chain": ("HandoffChain",),
        ".react": ("ToolLoop",),
        ".router": ("HandoffRouter", "Router", "RouterRoute"),
    },
)

__all__ = [
    "Architecture",
    "Capabilities",
    "Capability",
    "HandoffChain",
    "HandoffRouter",
    "RunContext",
    "Router",
    "RouterRoute",
    "ToolLoop",
]
