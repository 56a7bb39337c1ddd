"""A request in llama.cpp's terms for :class:`~jeeves_router.models.llamacpp.LlamaCppModel`: chat turns, cache, usage.

Pure helpers over the ``llama_cpp.Llama`` object the model holds: the chat-template messages of
a request's turns, how much of a prompt its KV cache holds, what a request spent.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from ..messages import Message, TextPart, ToolCallPart, ToolResultPart
from ..usage import Usage

__all__ = ["close_chunks", "common_prefix", "to_chat", "usage_of"]


def usage_of(llama: Any, prompt: list[int], texts: list[str], cached: int) -> Usage:
    """One request's usage: its prompt, the text generated so far, no cost (the model runs here)."""
    text = "".join(texts)
    output_tokens = len(llama.tokenize(text.encode("utf-8"), add_bos=False, special=False)) if text else 0
    return Usage(len(prompt), output_tokens, cached, 1, 0.0)


def close_chunks(chunks: Iterator[Any]) -> None:
    """Close llama.cpp's completion generator (it holds the model until closed)."""
    close = getattr(chunks, "close", None)
    if close is not None:
        close()


def common_prefix(llama: Any, tokens: list[int]) -> int:
    """How many leading prompt tokens are already in the model's KV cache."""
    try:
        evaluated = list(llama.input_ids[: llama.n_tokens])
    except (AttributeError, TypeError):
        return 0
    n = 0
    for a, b in zip(evaluated, tokens, strict=False):
        if a != b:
            break
        n += 1
    # llama.cpp re-evaluates the last prompt token to get fresh logits.
    return min(n, max(len(tokens) - 1, 0))


def to_chat(message: Message) -> dict[str, str]:
    """One turn as a chat-template message; tool traffic is rendered as text."""
    lines: list[str] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            lines.append(part.text)
        elif isinstance(part, ToolCallPart):
            lines.append(f"[called {part.name}({json.dumps(dict(part.arguments), ensure_ascii=False)})]")
        elif isinstance(part, ToolResultPart):
            lines.append(f"[result of {part.name}: {part.content}]")
    role = "assistant" if message.role == "assistant" else "user"
    return {"role": role, "content": "".join(lines) if len(lines) == 1 else "\n".join(lines)}
