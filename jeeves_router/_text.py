r"""The one rule for text entering the library: it is valid Unicode.

A Python string can hold an unpaired UTF-16 surrogate (``"\ud83d"``): ``json.loads`` makes
one of a ``\ud83d`` escape (an emoji cut in half by a client that truncates UTF-16), and
Python reads bytes that are not UTF-8 (a command line, standard input) as surrogate escapes
(``"\udcff"``). UTF-8 cannot carry such text: the tokenizers of the embedded encoders refuse
it and the model clients fail to send it. :func:`valid_text` replaces each unpaired
surrogate with U+FFFD (the replacement character) and joins a high and a low surrogate that
stand next to each other into the one character they encode; any other text is returned
as it is (the same object).

It is applied where text enters: :meth:`Agent.run <jeeves_router.agent.Agent.run>` and
``stream`` (the prompt and the history's text), the :class:`EmbeddingClassifier
<jeeves_router.classify.embedding.EmbeddingClassifier>` (route texts, negatives, the texts
it classifies or is fitted on) and the command line's request readers. The HTTP server
refuses such a body instead (400), before any of these see it.

Text also reaches a model or a tokenizer from elsewhere: a tool's result, a run's context
rendered into a classifier's prompt, a model's own reply sent back as history, instructions,
a classifier or an encoder called directly. Rather than at each of those sources, the rule is
applied again where text leaves the library: each model adapter passes the body it sends
through :func:`valid_json` (``OpenAIModel``, ``AnthropicModel``; ``LlamaCppModel`` the chat
it renders), and each built-in encoder its texts through :func:`valid_texts` before its
tokenizer.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar, cast

__all__ = ["valid_json", "valid_text", "valid_texts"]

_J = TypeVar("_J")


def valid_text(text: str) -> str:
    """``text`` with unpaired surrogates replaced by U+FFFD and split pairs joined.

    Args:
        text: Any string.

    Returns:
        ``text`` itself when it is valid Unicode (the common case: one ``isascii`` or one
        UTF-8 encode, no copy), else the repaired copy.
    """
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # UTF-16 writes each surrogate as its own code unit; reading the units back joins a
        # high-low pair into its character and replaces every unit left unpaired.
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


def valid_texts(texts: Iterable[str]) -> list[str]:
    """:func:`valid_text` of each of ``texts``, as a list."""
    return [valid_text(t) for t in texts]


def valid_json(value: _J) -> _J:
    r"""A JSON-like value with every string in it (keys too) made valid Unicode by :func:`valid_text`.

    Dicts, lists and tuples are walked; any other value is kept. A value whose strings are all
    valid is returned as it is (the same object, nothing copied): the model adapters pass every
    request body through here, nearly always to find nothing to repair. Only a ``\udXXX``
    escape in a JSON text can leave an unpaired surrogate in its decoded value; callers that
    hold the text may skip this when it has none.
    """
    return value if _is_valid(value) else cast(_J, _repaired(value))


def _is_valid(value: Any) -> bool:
    # Exact types first, in plain loops: a long conversation's body is walked in tens of µs.
    kind = type(value)
    if kind is str:
        return value.isascii() or valid_text(value) is value
    if kind is dict:
        for k, v in value.items():
            if not (_is_valid(k) and _is_valid(v)):
                return False
        return True
    if kind is list or kind is tuple:
        for v in value:
            if not _is_valid(v):
                return False
        return True
    if isinstance(value, str):  # a subclass (a str enum, say)
        return valid_text(value) is value
    if isinstance(value, dict):
        return all(_is_valid(k) and _is_valid(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return all(_is_valid(v) for v in value)
    return True


def _repaired(value: Any) -> Any:
    if isinstance(value, str):
        return valid_text(value)
    if isinstance(value, dict):
        return {_repaired(k): _repaired(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_repaired(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_repaired(v) for v in value)
    return value
