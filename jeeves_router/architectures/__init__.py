"""Architectures: how an agent turns a request into an answer."""

from .base import Architecture, RunContext
from .react import ToolLoop
from .router import Router, RouterRoute

__all__ = ["Architecture", "RunContext", "Router", "RouterRoute", "ToolLoop"]
