"""The indefinite article of a name in a message: "an EmbeddingClassifier", "a str".

Error messages name the type of a value they refused (``is a str, not an Agent``); the
article is chosen from the name's sound as far as its letters tell it: "an" before a vowel,
"a" before a consonant and before a "u" said as "you" (``a UUID``, ``a UsageError``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["a_type", "with_article"]

# A name starting with one of these is said with a "you" sound: "a UUID", "a UsageError", "a URL".
_YOU = ("uni", "usa", "use", "usu", "uti", "uu", "url", "uri")


def with_article(name: str) -> str:
    """``name`` after its indefinite article: ``"an EmbeddingClassifier"``, ``"a str"``, ``"a UsageError"``."""
    lower = name.lower()
    vowel = lower[:1] in ("a", "e", "i", "o", "u") and not lower.startswith(_YOU)
    return f"{'an' if vowel else 'a'} {name}"


def a_type(value: Any) -> str:
    """The type name of ``value`` after its article, for a message: ``"an int"``, ``"a dict"``."""
    return with_article(type(value).__name__)
