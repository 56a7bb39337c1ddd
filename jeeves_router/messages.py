"""Conversation messages and their parts, shared by every model adapter."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import field
from typing import Any, Literal, Union

from ._frozen import constructor, frozen

__all__ = [
    "TextPart",
    "ToolCallPart",
    "ToolResultPart",
    "Part",
    "Message",
    "Role",
    "user",
    "assistant",
    "text_of",
]

Role = Literal["user", "assistant", "tool"]


@frozen
class TextPart:
    """Plain text."""

    text: str
    kind: Literal["text"] = "text"


@frozen
class ToolCallPart:
    """A model's request to call a tool.

    Attributes:
        id: The provider's call id; tool results refer to it.
        name: The tool's name.
        arguments: The decoded arguments (a JSON object).
        raw_arguments: The undecoded argument text as the model produced it.
        argument_error: Set when the model's arguments were not a valid JSON object;
            the tool is then not called and the model is told what was wrong.
    """

    id: str
    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    raw_arguments: str | None = None
    argument_error: str | None = None
    kind: Literal["tool_call"] = "tool_call"


@frozen
class ToolResultPart:
    """The result of one tool call, sent back to the model."""

    call_id: str
    name: str
    content: str
    is_error: bool = False
    kind: Literal["tool_result"] = "tool_result"


Part = Union[TextPart, ToolCallPart, ToolResultPart]


@frozen
class Message:
    """One conversation turn: a role and its parts."""

    role: Role
    parts: tuple[Part, ...]

    @property
    def text(self) -> str:
        """The concatenated text parts."""
        return text_in(self.parts)

    @property
    def tool_calls(self) -> tuple[ToolCallPart, ...]:
        """The tool-call parts, in order."""
        return tool_calls_in(self.parts)


def text_in(parts: tuple[Part, ...]) -> str:
    """The concatenated text of the text parts among ``parts``."""
    if len(parts) == 1:  # the common case: one part, no join
        only = parts[0]
        return only.text if isinstance(only, TextPart) else ""
    return "".join([p.text for p in parts if isinstance(p, TextPart)])


def tool_calls_in(parts: tuple[Part, ...]) -> tuple[ToolCallPart, ...]:
    """The tool-call parts among ``parts``, in order."""
    if len(parts) == 1:  # the common case: one part
        return parts if isinstance(parts[0], ToolCallPart) else ()  # type: ignore[return-value]
    return tuple([p for p in parts if isinstance(p, ToolCallPart)])


#: ``Message(...)`` and ``TextPart(...)`` as plain functions (see ``constructor``): every run makes a few.
new_message = constructor(Message)
new_text = constructor(TextPart)


def user(text: str) -> Message:
    """A user message holding ``text``."""
    return new_message("user", (new_text(text),))


def assistant(text: str) -> Message:
    """An assistant message holding ``text``."""
    return new_message("assistant", (new_text(text),))


def text_of(messages: Sequence[Message]) -> str:
    """All text of ``messages`` as ``role: text`` lines (for prompts and logs)."""
    return "\n".join(f"{m.role}: {m.text}" for m in messages if m.text)
