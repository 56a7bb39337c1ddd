"""The classifier prompt: a template with a few named placeholders, no ``str.format``.

Placeholders are ``{routes}`` (one line per route with its description and examples) and
``{route_names}`` (the names, comma-separated). Any other ``{identifier}`` is an error at
construction time; every other brace — JSON examples such as ``{"route": "billing"}`` —
is kept literally.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..errors import UsageError
from .types import RouteSpec

__all__ = [
    "DEFAULT_CLASSIFIER_PROMPT",
    "PLACEHOLDERS",
    "validate_prompt_template",
    "render_prompt",
    "format_error_feedback",
]

PLACEHOLDERS = ("routes", "route_names")
_PLACEHOLDER_RE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")

DEFAULT_CLASSIFIER_PROMPT = """\
You are a request router. Read the user's request and choose the one route that fits it best.

Routes:
{routes}

Answer with exactly two lines and nothing else:
route: <one of: {route_names}>
confidence: <a number between 0 and 1: how sure you are>
"""


def validate_prompt_template(template: str) -> str:
    """Return ``template`` if its placeholders are all known, else raise UsageError."""
    if not isinstance(template, str) or not template.strip():
        raise UsageError("classifier_prompt must be a non-empty string")
    unknown = sorted({m.group(1) for m in _PLACEHOLDER_RE.finditer(template)} - set(PLACEHOLDERS))
    if unknown:
        allowed = ", ".join("{" + p + "}" for p in PLACEHOLDERS)
        raise UsageError(
            f"classifier_prompt has unknown placeholder(s) {', '.join('{' + u + '}' for u in unknown)}; "
            f"allowed: {allowed} (other braces are kept as written)"
        )
    if "{routes}" not in template and "{route_names}" not in template:
        raise UsageError("classifier_prompt must contain {routes} or {route_names} so the model sees the routes")
    return template


def _route_lines(routes: Sequence[RouteSpec]) -> str:
    lines = []
    for r in routes:
        line = f"- {r.name}: {r.description}" if r.description else f"- {r.name}"
        if r.examples:
            line += "\n  examples: " + " | ".join(r.examples)
        lines.append(line)
    return "\n".join(lines)


def render_prompt(template: str, routes: Sequence[RouteSpec]) -> str:
    """Fill the template's placeholders for ``routes``."""
    values = {"routes": _route_lines(routes), "route_names": ", ".join(r.name for r in routes)}
    return _PLACEHOLDER_RE.sub(lambda m: values.get(m.group(1), m.group(0)), template)


def format_error_feedback(status: str, reply: str, routes: Sequence[RouteSpec]) -> str:
    """The correction sent to the model after a malformed reply."""
    names = ", ".join(r.name for r in routes)
    problems = {
        "empty": "your reply was empty",
        "missing_route": "your reply had no 'route:' line",
        "unknown_route": "the route you named is not one of the routes",
        "ambiguous_route": "you named more than one route",
        "missing_confidence": "your reply had no 'confidence:' line",
        "invalid_confidence": "the confidence was not a number between 0 and 1",
    }
    problem = problems.get(status, "your reply was not in the required format")
    return (
        f"Format error: {problem}. Reply again with exactly two lines:\n"
        f"route: <one of: {names}>\nconfidence: <a number between 0 and 1>"
    )
