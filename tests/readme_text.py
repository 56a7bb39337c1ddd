"""The README's code, as the README tests read and run it (not a test module).

Its blocks, commands and code spans, and :func:`provider_stand_ins`: what a ``"provider:model"``
string resolves to while the blocks run (no key, no network).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

README = Path(__file__).resolve().parents[1] / "README.md"
_PYTHON = re.compile(r"```python\n(.*?)```", re.S)
_BASH = re.compile(r"```bash\n(.*?)```", re.S)
_FENCED = re.compile(r"```.*?```", re.S)
_SPAN = re.compile(r"`((?:[^`\n]|\n(?!\n))+)`")

#: Words that make an inline command prose, not a command: ``jeeves-router mcp module:attr``.
PLACEHOLDERS = frozenset({"...", "module:attr", "path"})


def line_of(text: str, at: int) -> int:
    return text.count("\n", 0, at) + 1


def python_blocks_at() -> list[tuple[int, str]]:
    """The ``python`` blocks with the README line their code starts on."""
    text = README.read_text(encoding="utf-8")
    return [(line_of(text, m.start(1)), m.group(1)) for m in _PYTHON.finditer(text)]


def python_blocks() -> list[str]:
    return [block for _, block in python_blocks_at()]


def bash_commands() -> list[tuple[int, list[str], list[str]]]:
    """Each command of the ``bash`` blocks: (README line, its words, the output the README shows under it).

    A line ``# ...`` right under a command (or under its output) is output it prints; ``a && b``
    is two commands.
    """
    text = README.read_text(encoding="utf-8")
    commands: list[tuple[int, list[str], list[str]]] = []
    for m in _BASH.finditer(text):
        start = line_of(text, m.start(1))
        for offset, line in enumerate(m.group(1).splitlines()):
            if line.startswith("# ") and commands and commands[-1][0] >= start:
                commands[-1][2].append(line[2:])
            elif line.strip():
                words = shlex.split(line, comments=True)
                while "&&" in words:
                    cut = words.index("&&")
                    commands.append((start + offset, words[:cut], []))
                    words = words[cut + 1 :]
                commands.append((start + offset, words, []))
    return commands


def code_spans(text: str | None = None) -> list[tuple[int, str]]:
    """The prose's code spans (outside fenced blocks; a span may wrap a line), with their README line."""
    text = README.read_text(encoding="utf-8") if text is None else text
    prose = _FENCED.sub(lambda m: "\n" * m.group(0).count("\n"), text)  # keep the line numbers
    prose = re.sub(r"``+", "", prose)  # ```` ```json ```` and ``` `` ```: fences quoted, not spans
    return [(line_of(prose, m.start()), m.group(1).replace("\n", " ")) for m in _SPAN.finditer(prose)]


def inline_commands() -> list[tuple[int, list[str]]]:
    """The ``jeeves-router <command> <arguments>`` the prose quotes in code spans, placeholders left out.

    A bare name (```jeeves-router replay```) is a mention, not a command.
    """
    commands: list[tuple[int, list[str]]] = []
    for line, span in code_spans():
        if span.startswith("jeeves-router "):
            words = shlex.split(span)
            if len(words) > 2 and not PLACEHOLDERS & set(words):
                commands.append((line, words))
    return commands


def provider_model(name: str) -> Any:
    """What a ``"provider:model"`` string resolves to while the examples run: a test model.

    It routes every request to ``billing`` (by a ``route:`` reply, or by calling the offered
    ``classify_as_billing`` tool) and answers every agent turn with "Done.".
    """
    from jeeves_router.testing import Call, FunctionModel

    def reply(request: Any) -> Any:
        if any(spec.name == "classify_as_billing" for spec in request.tools):
            return Call("classify_as_billing", {"reason": "a payment question", "confidence": 0.9})
        return "route: billing\nconfidence: 0.9" if request.purpose == "classify" else "Done."

    return FunctionModel(reply, name=name)


def provider_stand_ins() -> dict[str, Any]:
    """The model registry's custom providers with ``openai`` and ``anthropic`` resolving to :func:`provider_model`."""
    from jeeves_router.models import registry

    return {**registry._CUSTOM, "openai": provider_model, "anthropic": provider_model}
