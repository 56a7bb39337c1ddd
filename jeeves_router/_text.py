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
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["valid_json", "valid_text", "valid_texts"]


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


def valid_json(value: Any) -> Any:
    r"""Decoded JSON with every string in it (keys too) made valid Unicode by :func:`valid_text`.

    Only a ``\udXXX`` escape in the JSON text can leave an unpaired surrogate in the decoded
    value; callers that hold the text may skip this when it has none.
    """
    if isinstance(value, str):
        return valid_text(value)
    if isinstance(value, list):
        return [valid_json(v) for v in value]
    if isinstance(value, dict):
        return {valid_text(k): valid_json(v) for k, v in value.items()}
    return value
