"""Architectures: how an agent turns a request into an answer."""

from .base import Architecture, RunContext
from .capabilities import Capabilities, Capability
from .handoff import HandoffRouter
from .handoff_chain import HandoffChain
from .react import ToolLoop
from .router import Router, RouterRoute

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
