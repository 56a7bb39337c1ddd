"""Constrained classification: replies well-formed by construction, and few-shot turns.

When a model can constrain its decoding to a JSON schema (OpenAI structured outputs,
llama.cpp grammars, a forced tool call on Anthropic), the classifier asks for
:func:`classification_format` — an object whose ``route`` is an ``enum`` of the declared
route names and whose ``confidence`` is a number in [0, 1] — so the reply always names a
declared route. Adapters declare the ability with a class attribute::

    class MyModel:
        supports_response_format = True     # ModelRequest.response_format is enforced

Models without it get the plain text prompt and :func:`~.parser.parse_classification`.

Few-shot turns (:func:`few_shot_turns`) show the model example requests and the exact
reply expected for each, built from the routes' ``examples``; small local models follow
the format far better with them than with an instruction alone.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..errors import UsageError
from ..messages import Message, assistant, user
from ..models.base import Model, ResponseFormat
from .parser import format_classification
from .types import RouteSpec

__all__ = [
    "CONSTRAINED_CLASSIFIER_PROMPT",
    "RESPONSE_FORMAT_NAME",
    "classification_schema",
    "classification_format",
    "supports_constrained",
    "few_shot_turns",
    "example_reply",
]

#: The ``ResponseFormat`` name (also the forced tool's name on Anthropic).
RESPONSE_FORMAT_NAME = "classification"

CONSTRAINED_CLASSIFIER_PROMPT = """\
You are a request router. Read the user's request and choose the one route that fits it best.

Routes:
{routes}

Answer with a JSON object and nothing else:
{"route": "<one of: {route_names}>", "confidence": <a number between 0 and 1: how sure you are>}
"""


def classification_schema(routes: Sequence[RouteSpec | str]) -> dict[str, Any]:
    """The JSON schema of a classification reply restricted to ``routes`` (specs or names).

    Raises:
        UsageError: ``routes`` is empty.
    """
    if not routes:
        raise UsageError("a constrained classification needs at least one route")
    return {
        "type": "object",
        "properties": {
            "route": {"type": "string", "enum": [r.name if isinstance(r, RouteSpec) else str(r) for r in routes]},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        },
        "required": ["route", "confidence"],
        "additionalProperties": False,
    }


def classification_format(routes: Sequence[RouteSpec | str]) -> ResponseFormat:
    """The :class:`ResponseFormat` asking for a reply under :func:`classification_schema`."""
    return ResponseFormat(RESPONSE_FORMAT_NAME, classification_schema(routes))


def supports_constrained(model: Model) -> bool:
    """Whether ``model`` declares that it enforces ``ModelRequest.response_format``."""
    return getattr(model, "supports_response_format", False) is True


def example_reply(route: str, confidence: float, *, as_json: bool) -> str:
    """The reply a few-shot turn shows for ``route``: JSON or the two-line text form."""
    if as_json:
        return json.dumps({"route": route, "confidence": confidence})
    return format_classification(route, confidence)


def few_shot_turns(
    routes: tuple[RouteSpec, ...],
    *,
    per_route: int = 1,
    confidence: float = 0.9,
    as_json: bool = False,
) -> tuple[Message, ...]:
    """Example user/assistant turn pairs built from the routes' examples.

    Examples are taken round-robin — the first example of every route, then the second,
    and so on — so no route dominates the end of the conversation.

    Args:
        routes: The routes; those without examples contribute nothing.
        per_route: At most this many examples per route.
        confidence: The confidence written in the example replies.
        as_json: Write the replies as JSON (for constrained requests).

    Raises:
        UsageError: ``per_route`` is negative or ``confidence`` is outside [0, 1].
    """
    if per_route < 0:
        raise UsageError(f"few_shot must be >= 0 examples per route, got {per_route}")
    if not 0.0 <= confidence <= 1.0:
        raise UsageError(f"the few-shot confidence must be within [0, 1], got {confidence}")
    turns: list[Message] = []
    for i in range(per_route):
        for route in routes:
            if i < len(route.examples):
                turns.append(user(route.examples[i]))
                turns.append(assistant(example_reply(route.name, confidence, as_json=as_json)))
    return tuple(turns)
