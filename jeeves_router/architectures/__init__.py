"""Architectures: how an agent turns a request into an answer."""

from .base import Architecture, RunContext
from .capabilities.architecture import Capabilities, Capability
from .handoffs.chain import HandoffChain
from .react import ToolLoop
from .router import HandoffRouter, Router, RouterRoute

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
