"""The classification parser: any text -> :class:`Classification`.

:func:`parse_classification` is pure, total and linear in the length of the reply: it
never raises for any reply (only for misused ``routes`` or ``on_bad_confidence``), the
confidence it returns is always within [0, 1], the route is always a declared one (or
``None``), and anything it cannot read unambiguously fails closed.

Precedence (one rule, applied in this order):

1. **Key lines.** If the reply has at least one ``route:`` key line (see
   :mod:`.reply`: one key per line, anchored at the line start, ``:`` or ``=``, markdown
   around keys and values ignored), the key lines are the only source. JSON anywhere in
   the reply is then ignored, including a fragment inside a value
   (``reason: user pasted {"route": "x"}``).
2. **JSON objects.** Otherwise every top-level JSON object with a ``route`` key is read —
   bare, inside a ```` ```json ```` fence, before or after prose — except an object that
   starts inside the value of a ``confidence:`` / ``reason:`` line.
3. Otherwise the status is ``missing_route``.

Within the chosen source, every ``route`` and every ``confidence`` counts:

- Two different routes (two route lines, two objects, a repeated JSON key, or a value that
  lists declared routes such as ``billing, technical``) give ``ambiguous_route``, whatever
  their order and whether or not they are declared. Repeating the same route is fine.
- Each confidence must be one number (see :mod:`.confidence`); fractions, ranges,
  ``x out of y``, words, several numbers, NaN, infinities and values outside [0, 1] give
  ``invalid_confidence``, as do two confidences that differ.

Route names: a value matches a declared route when both are equal after ASCII case
folding and treating runs of ASCII whitespace, ``-`` and ``_`` as one separator
(``Tech Support`` matches ``tech-support``). There is no Unicode normalisation: a value
with look-alike letters (Cyrillic ``\u0430``, fullwidth ``\uff42``, the Kelvin sign) or invisible
characters (zero-width space, joiners, BOM) inside it does not match (``unknown_route``).
A declared name followed by punctuation and other words (``billing, because ...``,
``tech support (api errors)``) matches that name.

First step: a reply in a canonical form is read by one bounded regular expression and a
lookup: the two lines :func:`format_classification` writes (``route: <declared name>`` and
``confidence: <plain decimal in [0, 1]>``), or the one JSON object a constrained model
writes (``{"route": "<declared name>", "confidence": <number in [0, 1]>}``, single spaces
optional around its punctuation); either may end with a newline. It is the same rule, not
another one: the lookup table is filled by the full path itself for exactly the value the
expression captures, and anything else goes through the full path.

On a non-``ok`` status, ``reason`` says what was seen (``"confidence '1/5' is a
fraction, not one number"``) instead of the reply's own reason.

Policy for a missing or bad confidence: by default it **fails closed** — the status is
``missing_confidence`` or ``invalid_confidence``, the confidence is 0.0, and the Router
treats it like any other non-``ok`` status (fallback, else unresolved). Pass
``on_bad_confidence=<value>`` to accept the route with that confidence instead (the
status is then ``ok``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any, NamedTuple

from .._frozen import constructor
from ..errors import UsageError
from .confidence import clean_value, read_confidence, show
from .reply import MAX_KEY_LINES, ascii_lower, json_objects, json_type, key_lines
from .resolve import valid_confidence
from .types import Classification, ParseStatus, RouteSpec

__all__ = ["parse_classification", "normalize_route_name", "format_classification"]

_classification = constructor(Classification)  # the first step's answer, on every routed request

_SEP_RE = re.compile(r"[ \t\n\r\f\v_\-]+")
_ASCII_SPACE = " \t\n\r\f\v"
# Where a declared name may end inside a longer value: "billing, because ...".
_HEAD_END_RE = re.compile(r"[,;:(\[{]|[ \t][-\u2013\u2014][ \t]|\.[ \t]")
_LIST_SEP_RE = re.compile(r"[,;/|]")
_LIST_ITEMS = 8  # list items checked for "billing, technical"
# The canonical reply (see format_classification). Bounded, so it costs at most a few
# hundred steps whatever the text; a longer name or number takes the full path.
_WELL_FORMED_RE = re.compile(r"route: ([^\n\r]{1,128})\nconfidence: ([01](?:\.[0-9]{0,32})?|\.[0-9]{1,32})\n?")
# The JSON a constrained model writes (see models/_gbnf.py: a space may follow any token).
_WELL_FORMED_JSON_RE = re.compile(
    r'\{ ?"route" ?: ?"([^"\\\x00-\x1f]{1,128})" ?, ?"confidence" ?: ?([01](?:\.[0-9]{1,32})?) ?\} ?\n?'
)

# (identity, declared name or None, the value as written)
_Mention = tuple[str, str | None, str]


def normalize_route_name(name: str) -> str:
    """The matching key of a route name.

    ASCII letters are lower-cased and runs of ASCII whitespace, ``-`` and ``_`` become
    one ``-``; any other character is kept as it is (no Unicode normalisation).

    Example:
        >>> from jeeves_router.classify.parser import normalize_route_name
        >>> normalize_route_name("Tech_Support")
        'tech-support'
    """
    return ascii_lower(_SEP_RE.sub("-", name.strip(_ASCII_SPACE)).strip("-"))


def format_classification(route: str, confidence: float) -> str:
    """The canonical reply text that :func:`parse_classification` reads back exactly."""
    return f"route: {route}\nconfidence: {confidence!r}"


class _Index(NamedTuple):
    """The declared routes, ready for matching."""

    names: dict[str, str]  # normalised name -> declared name
    head_limit: int  # how far into a value a declared name may end ("billing, because ...")
    ascii: bool  # every declared name is ASCII
    # name as written after "route: " in a canonical reply -> the declared route it names
    # (filled by _mentions itself, so the first step reads exactly what the full path reads)
    exact: dict[str, str]

    def key(self, text: str) -> str:
        """The matching key of ``text``, or ``text`` itself when it cannot match.

        Normalising keeps non-ASCII characters, so with ASCII route names a non-ASCII text
        never matches: it is returned as it is, saving a pass over it.
        """
        return normalize_route_name(text) if text.isascii() or not self.ascii else text


def _mentions(value: str, index: _Index) -> list[_Mention]:
    """The routes one route value names (none, one, or several for a list).

    A declared name followed by punctuation is looked for in the first
    ``index.head_limit`` characters only, so a long value costs one pass.
    """
    v = clean_value(value)
    if not v:
        return []
    names = index.names
    key = index.key(v)
    if key in names:
        return [(key, names[key], v)]
    items = _LIST_SEP_RE.split(v, maxsplit=_LIST_ITEMS)
    if len(items) > 1:
        listed = {k: names[k] for k in (index.key(clean_value(i)) for i in items[:_LIST_ITEMS]) if k in names}
        if len(listed) > 1:
            return [(k, name, name) for k, name in listed.items()]
    m = _HEAD_END_RE.search(v, 0, index.head_limit)
    if m is not None:
        hkey = index.key(clean_value(v[: m.start()]))
        if hkey in names:
            return [(hkey, names[hkey], v)]
    return [(key, None, v)]


def parse_classification(
    text: object,
    routes: Iterable[str | RouteSpec],
    *,
    on_bad_confidence: float | None = None,
) -> Classification:
    r"""Read a route and a confidence from a classifier's reply.

    See the module documentation for the precedence between key lines and JSON, the
    ambiguity rule and how route names are compared.

    Args:
        text: The reply. Any value is accepted; non-strings are treated as empty.
        routes: The declared route names (or RouteSpecs).
        on_bad_confidence: ``None`` (default) fails closed on a missing or invalid
            confidence; a number in [0, 1] is used instead and the status stays ``ok``.

    Returns:
        A :class:`Classification`; never raises, whatever the text.

    Raises:
        UsageError: For ``routes`` given as one string (``"billing"`` would declare the
            routes ``b``, ``i``, ...) or not an iterable, and for an ``on_bad_confidence``
            that is neither ``None`` nor a number in [0, 1] (it would be ignored).

    Example:
        >>> from jeeves_router.classify import parse_classification
        >>> parse_classification("route: billing\nconfidence: 85%", ["billing"]).confidence
        0.85
        >>> parse_classification("route: billing\nconfidence: 1/5", ["billing"]).status
        'invalid_confidence'
    """
    if type(routes) is not tuple and (isinstance(routes, (str, bytes)) or not isinstance(routes, Iterable)):
        raise UsageError(
            f"parse_classification: routes must be a list of route names, got {routes!r:.80}: e.g. ['billing']"
        )
    if on_bad_confidence is not None and not valid_confidence(on_bad_confidence):
        raise UsageError(
            f"parse_classification: on_bad_confidence must be None or a number in [0, 1], got {on_bad_confidence!r}"
        )
    try:
        return _parse(text, routes, on_bad_confidence)
    except Exception:  # totality: a bug here must not crash a run
        raw = text if isinstance(text, str) else ""
        return Classification(None, 0.0, "missing_route", raw, "the reply could not be read")


@lru_cache(maxsize=256)
def _route_index(routes: tuple[str | RouteSpec, ...]) -> _Index:
    names: dict[str, str] = {}
    declared: list[str] = []
    for r in routes:
        name = r.name if isinstance(r, RouteSpec) else str(r)
        declared.append(name)
        names.setdefault(normalize_route_name(name), name)
    longest = max((len(n) for n in names.values()), default=0)
    index = _Index(names, 2 * longest + 16, all(k.isascii() for k in names), {})
    for name in declared:  # as a key line's value (" billing") and as a JSON string
        found = _mentions(" " + name, index)
        if len(found) == 1 and found[0][1] is not None and _mentions(name, index) == found:
            index.exact[name] = found[0][1]
    return index


# The last routes seen and their index: the Router passes the same tuple on every request,
# and an identity check is cheaper than hashing every RouteSpec for the cache.
_last_index: tuple[object, _Index | None] = (object(), None)


def _index(routes: Iterable[str | RouteSpec]) -> _Index:
    global _last_index
    last_routes, last = _last_index
    if last_routes is routes and last is not None:
        return last
    routes_t = routes if isinstance(routes, tuple) else tuple(routes)
    if not all(type(r) is str or (type(r) is RouteSpec and type(r.name) is str) for r in routes_t):
        # a str subclass equals (and hashes as) the plain name, so the cache would answer it with
        # another table's index, built from another str(): such tables are indexed afresh
        return _route_index.__wrapped__(routes_t)
    try:
        index = _route_index(routes_t)
    except TypeError:  # unhashable route objects: build the index without the cache
        return _route_index.__wrapped__(routes_t)
    if routes_t is routes:
        _last_index = (routes_t, index)
    return index


def _sources(raw: str) -> tuple[list[Any], list[Any], str | None] | str:
    """(route values, confidence values, stated reason) by the precedence, or a problem."""
    lines = key_lines(raw)
    if lines is None:
        return f"the reply has more than {MAX_KEY_LINES} key lines; none was used"
    values: dict[str, list[Any]] = {"route": [], "confidence": [], "reason": []}
    for kl in lines:
        values[kl.key].append(kl.value)
    if values["route"]:
        reasons = [r for r in map(clean_value, values["reason"]) if r]
        return values["route"], values["confidence"], reasons[0] if reasons else None
    scan = json_objects(raw, [(kl.start, kl.end) for kl in lines])
    if scan.gave_up:
        return f"the reply has {scan.gave_up}; none was used"
    objects = [o for o in scan.objects if "route" in o]
    if not objects:
        return "no 'route:' line and no JSON object with a \"route\" key"
    stated = [v for o in objects for v in o.get("reason", ()) if isinstance(v, str) and v.strip()]
    return (
        [v for o in objects for v in o["route"]],
        [v for o in objects for v in o.get("confidence", ())],
        stated[0] if stated else None,
    )


def _parse(text: object, routes: Iterable[str | RouteSpec], on_bad: float | None) -> Classification:
    raw = text if isinstance(text, str) else ""
    index = _index(routes)
    first = _well_formed(raw, index)
    return first if first is not None else _read(raw, index, on_bad)


def _well_formed(raw: str, index: _Index) -> Classification | None:
    """The first step: a canonical reply naming a declared route, else ``None``.

    What :func:`_read` returns for the same reply. Two key lines: JSON is ignored and no
    reason is stated. One JSON object and no key line (the text is one line starting with
    ``{``): no reason is stated. The route value (``" " + name`` on a line, ``name`` in
    JSON, which has no escapes) is looked up in ``index.exact``, filled by
    :func:`_mentions` for both; the number has no sign, exponent, percent sign or
    decoration, so ``float`` reads it as :func:`.read_confidence` and the JSON decoder do.
    """
    m = _WELL_FORMED_RE.fullmatch(raw) or _WELL_FORMED_JSON_RE.fullmatch(raw)
    if m is None:
        return None
    route = index.exact.get(m[1])
    if route is None:
        return None
    x = float(m[2])
    return _classification(route, x, "ok", raw) if x <= 1.0 else None


def _read(raw: str, index: _Index, on_bad: float | None) -> Classification:
    """The full path: key lines or JSON, every route and confidence checked."""
    if not raw or raw.isspace():
        return Classification(None, 0.0, "empty", raw)
    sources = _sources(raw)
    if isinstance(sources, str):
        return Classification(None, 0.0, "missing_route", raw, sources)
    route_values, conf_values, stated = sources

    named: dict[str, _Mention] = {}
    read: set[str] = set()
    for rv in route_values:
        if rv is None or (isinstance(rv, str) and rv in read):
            continue
        if isinstance(rv, str):
            read.add(rv)
            mentions = _mentions(rv, index)
        else:
            mentions = [(f"<{json_type(rv)}>", None, f"a JSON {json_type(rv)}")]
        for mention in mentions:
            named.setdefault(mention[0], mention)
        if len(named) > 1:
            first, second = list(named.values())[:2]
            why = f"several routes named: {show(first[2])} and {show(second[2])}"
            return Classification(None, 0.0, "ambiguous_route", raw, why, requested=first[2])
    if not named:
        return Classification(None, 0.0, "missing_route", raw, "the route is empty")
    _, route, requested = next(iter(named.values()))
    if route is None:
        why = f"route {show(requested)} is not a declared route"
        if not requested.isascii():
            why += " (it has non-ASCII characters; route names are compared as ASCII)"
        return Classification(None, 0.0, "unknown_route", raw, why, requested=requested)

    confidence, problem = _confidence(conf_values)
    if confidence is None:
        if on_bad is not None and isinstance(on_bad, (int, float)) and 0.0 <= on_bad <= 1.0:
            return Classification(route, float(on_bad), "ok", raw, stated)
        status: ParseStatus = "missing_confidence" if not conf_values else "invalid_confidence"
        return Classification(route, 0.0, status, raw, problem)
    return Classification(route, confidence, "ok", raw, stated)


def _confidence(values: list[Any]) -> tuple[float | None, str]:
    """One confidence from every value given, or the first problem."""
    if not values:
        return None, "no confidence given"
    found: float | None = None
    seen: set[str] = set()
    for v in values:
        if isinstance(v, str):
            if v in seen:
                continue
            seen.add(v)
        if isinstance(v, (list, tuple)):  # a JSON list or object
            return None, f"confidence is a JSON {json_type(v)}, not a number"
        x, problem = read_confidence(v)
        if x is None:
            return None, problem
        if found is not None and x != found:
            return None, f"two different confidences: {found!r} and {x!r}"
        found = x
    return found, ""
