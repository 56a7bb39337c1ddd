"""The model port: what an agent needs from a language model.

A :class:`Model` answers a :class:`ModelRequest` either at once (:meth:`Model.request`)
or as a stream (:meth:`Model.stream`) of :class:`ModelTextDelta` items ending with exactly
one :class:`ModelResponse`. Adapters for real providers live beside this module and are
the only code that imports provider SDKs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any, Literal, Protocol, Union, runtime_checkable

from .._frozen import frozen
from ..messages import Message, Part, ToolCallPart, new_message, text_in, tool_calls_in
from ..usage import NO_USAGE, Usage

__all__ = [
    "ToolSpec",
    "ResponseFormat",
    "ModelRequest",
    "ModelResponse",
    "ModelTextDelta",
    "ModelStreamItem",
    "Model",
    "StopReason",
]

StopReason = Literal["end", "tool_calls", "max_tokens", "stop_sequence", "content_filter", "other"]


@frozen
class ToolSpec:
    """A tool as the model sees it: name, description and a JSON schema of its arguments."""

    name: str
    description: str
    parameters: Mapping[str, Any]


@frozen
class ResponseFormat:
    """A request to constrain the reply to a JSON schema (when the backend supports it)."""

    name: str
    schema: Mapping[str, Any]


@frozen
class ModelRequest:
    """One request to a model.

    Attributes:
        messages: The conversation so far (user, assistant and tool turns).
        system: The system prompt, if any.
        tools: Tools the model may call.
        temperature: Sampling temperature; ``None`` leaves the model's default.
        max_tokens: Cap on generated tokens; ``None`` leaves the adapter's default.
        stop: Stop sequences.
        tool_choice: ``"auto"``, ``"required"``, ``"none"`` or one tool's name to force it.
        response_format: A JSON schema to constrain the reply to, when supported.
        purpose: ``"chat"`` for agent turns, ``"classify"`` for routing decisions
            (adapters use it to mark prompts cacheable).
    """

    messages: tuple[Message, ...]
    system: str | None = None
    tools: tuple[ToolSpec, ...] = ()
    temperature: float | None = None
    max_tokens: int | None = None
    stop: tuple[str, ...] = ()
    tool_choice: str = "auto"
    response_format: ResponseFormat | None = None
    purpose: Literal["chat", "classify"] = "chat"


@frozen
class ModelResponse:
    """A complete model answer."""

    parts: tuple[Part, ...]
    usage: Usage = NO_USAGE
    stop_reason: StopReason | None = "end"
    model_name: str | None = None

    @property
    def text(self) -> str:
        """The concatenated text parts."""
        return text_in(self.parts)

    @property
    def tool_calls(self) -> tuple[ToolCallPart, ...]:
        """The tool-call parts, in order."""
        return tool_calls_in(self.parts)

    def as_message(self) -> Message:
        """This answer as an assistant message."""
        return new_message("assistant", self.parts)


@frozen
class ModelTextDelta:
    """A piece of streamed text."""

    text: str


ModelStreamItem = Union[ModelTextDelta, ModelResponse]


@runtime_checkable
class Model(Protocol):
    """A language model behind the port.

    Implementations must make every wait cancellable and must not retry after text has
    been yielded from :meth:`stream`. Every request sent counts in ``Usage.requests``: an
    implementation that retries adds its failed attempts' usage to the response's, and
    marks a call that fails with what it spent
    (:func:`~jeeves_router.usage.with_spent_usage`), which the run counts.
    """

    @property
    def name(self) -> str:
        """A printable identifier, e.g. ``"openai:gpt-4.1-mini"`` (never a secret)."""
        ...

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Answer ``request`` in one piece."""
        ...

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        """Answer ``request`` as text deltas followed by exactly one final ModelResponse.

        The returned async iterator must release its resources when closed early
        (callers wrap it in :func:`contextlib.aclosing`).
        """
        ...
