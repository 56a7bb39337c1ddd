"""What the architectures need from an agent: the :class:`Actor` protocol.

:class:`~jeeves_router.Agent` implements it. The architectures (tool loop, router, handoff
chains, capabilities) are typed against this protocol, never against ``Agent`` itself, so
``agent`` imports the architectures and nothing imports back: there is no import cycle,
not even a type-only one (``tests/test_layers.py`` checks it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from .models.base import Model
from .runtime import Runtime
from .tools import Tool, Toolset

if TYPE_CHECKING:
    from .architectures.base import Architecture

__all__ = ["Actor"]


class Actor(Protocol):
    """An agent as an architecture sees it.

    Attributes:
        name: Its name (route paths, events).
        instructions: Its system prompt.
        model: Its model, or a ``"provider:model"`` string resolved by :meth:`resolved_model`.
        tools: Its tools, in order; ``tool_map`` by name.
        toolsets: Its toolsets (MCP servers), opened for each run.
        architecture: How it handles a request.
        max_turns: Bound on the tool loop's model turns.
        temperature: Sampling temperature (``None``: the model's default).
        max_tokens: Output cap per turn (``None``: the adapter's default).
        runtime: Its durability port.
        handoffs: Agents (or names) it may hand off to.
        classify_error: Its recovery hook, if any.
    """

    name: str
    instructions: str
    model: Model | str | None
    tools: tuple[Tool, ...]
    tool_map: dict[str, Tool]
    toolsets: tuple[Toolset, ...]
    architecture: Architecture
    max_turns: int
    temperature: float | None
    max_tokens: int | None
    runtime: Runtime
    handoffs: tuple[Any, ...]
    classify_error: Callable[..., Any] | None

    def resolved_model(self) -> Model:
        """Its model, resolving a ``"provider:model"`` string on first use."""
        ...
