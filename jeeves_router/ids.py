"""Session-id derivation.

A routed specialist runs under ``child_session_id(parent, route)``, which is
``f"{parent}__route_{route}"``. Route names are restricted to
:data:`ROUTE_NAME_PATTERN` (letters and digits, joined by single ``-`` or ``_``), so a
route name never contains ``"__"``. The last ``"__route_"`` in a child id is therefore
always the separator, and :func:`split_child_session_id` recovers ``(parent, route)``
exactly: the mapping is injective, and two different (parent, route) pairs never share
a child id (``x`` + ``y__route_z`` is impossible because ``y__route_z`` is not a valid
route name).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import cast

from .errors import UsageError

__all__ = [
    "ROUTE_NAME_PATTERN",
    "SEPARATOR",
    "validate_route_name",
    "route_name_key",
    "validate_route_names",
    "check_oos_label",
    "child_session_id",
    "split_child_session_id",
    "new_session_id",
    "check_idempotency_key",
    "keyed_session_id",
    "keyed_run_id",
    "SESSION_ID",
    "SESSION_ID_RULE",
]

#: Route and agent names: 1-48 characters, letters/digits joined by single ``-`` or ``_``.
ROUTE_NAME_PATTERN = r"[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)*"
_ROUTE_NAME_RE = re.compile(ROUTE_NAME_PATTERN)
_MAX_NAME = 48
SEPARATOR = "__route_"
_CHECKED: set[str] = set()  # route names child_session_id has validated (bounded)
_MAX_CHECKED = 1024


def validate_route_name(name: object, *, what: str = "route name") -> str:
    """Return ``name`` if it is a valid route name, else raise :class:`UsageError`."""
    if not isinstance(name, str) or not name:
        raise UsageError(f"{what} must be a non-empty string, got {name!r}")
    if len(name) > _MAX_NAME or _ROUTE_NAME_RE.fullmatch(name) is None:
        raise UsageError(
            f"{what} {name!r} is not allowed: use 1-{_MAX_NAME} letters or digits, "
            "optionally joined by single '-' or '_' (e.g. 'billing', 'tech-support')"
        )
    return name


def route_name_key(name: str) -> str:
    """The key two route names collide on: lower case, with ``-``, ``_`` and spaces alike.

    ``Billing`` and ``billing``, or ``tech-support`` and ``tech_support``, share a key: a
    classifier's answer (or a person) cannot tell them apart, so one table never holds both.
    """
    return re.sub(r"[\s_\-]+", "-", name.strip()).strip("-").lower()


def validate_route_names(
    names: Iterable[object], *, owner: str = "route table", what: str = "route"
) -> tuple[str, ...]:
    """Check a route table's names: each valid (:func:`validate_route_name`), no two colliding.

    The one rule shared by ``Router`` (and its ``HandoffRouter`` preset), route files, the embedded
    classifier and ``Capabilities`` (whose names its selection and plans answer with, as a classifier's
    answer names a route). Every offending name is listed, so one run reports them all.

    Args:
        names: The route names, in table order.
        owner: Who owns the table, for the message (``"Router"``, a file name, ...).
        what: What the names name, for the message (``"route"``, ``"capability"``).

    Returns:
        The names as a tuple.

    Raises:
        UsageError: For no names, invalid names, or names that collide under
            :func:`route_name_key` (case-insensitive, ``-``/``_``/space alike).
    """
    table = tuple(names)
    if not table:
        raise UsageError(f"{owner} needs at least one {what}")
    bad = [n for n in table if not isinstance(n, str) or len(n) > _MAX_NAME or _ROUTE_NAME_RE.fullmatch(n) is None]
    if bad:
        raise UsageError(
            f"{owner}: {what} name{'s' if len(bad) > 1 else ''} {', '.join(map(repr, bad))} not allowed: use "
            f"1-{_MAX_NAME} letters or digits, optionally joined by single '-' or '_' (e.g. 'billing', 'tech-support')"
        )
    groups: dict[str, list[str]] = {}
    for n in table:
        groups.setdefault(route_name_key(cast(str, n)), []).append(cast(str, n))
    clashes = [g for g in groups.values() if len(g) > 1]
    if clashes:
        listed = "; ".join(" = ".join(map(repr, g)) for g in clashes)
        raise UsageError(
            f"{owner}: duplicate {what} names {listed} (names are compared case-insensitively, with '-', '_' "
            "and spaces alike); rename or merge them"
        )
    return cast(tuple[str, ...], table)


def check_oos_label(oos_label: str, names: Iterable[str]) -> None:
    """Refuse an out-of-scope label that is also a route's name (compared as route names are).

    Labelled data marks out-of-scope rows with the label: a route of that name could never be
    scored right, and a classifier's answer naming it would be counted as a rejection.

    Raises:
        UsageError: Naming the route and both ways out.
    """
    key = route_name_key(oos_label)
    for name in names:
        if key and route_name_key(name) == key:
            raise UsageError(
                f"route {name!r} has the name of the out-of-scope label {oos_label!r}: rows labelled {oos_label!r} "
                "would be read as out of scope; rename the route or pick another out-of-scope label (--oos-label)"
            )


def child_session_id(parent: str, route: str) -> str:
    """The deterministic session id of ``route``'s specialist under ``parent``.

    Raises:
        UsageError: if ``route`` is not a valid route name.
    """
    # A run derives the same few child ids again and again: each name is checked once.
    if type(route) is not str or route not in _CHECKED:
        validate_route_name(route)
        if len(_CHECKED) >= _MAX_CHECKED:
            _CHECKED.clear()
        _CHECKED.add(route)
    return f"{parent}{SEPARATOR}{route}"


def split_child_session_id(session_id: str) -> tuple[str, str] | None:
    """Invert :func:`child_session_id`; ``None`` if ``session_id`` is not a child id."""
    idx = session_id.rfind(SEPARATOR)
    if idx < 0:
        return None
    route = session_id[idx + len(SEPARATOR) :]
    if len(route) > _MAX_NAME or _ROUTE_NAME_RE.fullmatch(route) is None:
        return None
    return session_id[:idx], route


def new_session_id() -> str:
    """A fresh random session id."""
    import uuid  # here, not at the top: uuid imports platform, which costs more at start-up than here

    return uuid.uuid4().hex


#: Idempotency keys: 1-255 printable ASCII characters (space to ``~``).
#: The session ids the servers take (a served request's ``session_id``, ``GET /v1/sessions/{id}``, MCP ``ask``).
SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
#: What :data:`SESSION_ID` takes, for error messages.
SESSION_ID_RULE = (
    "session_id must be 1-128 characters: letters, digits and '.', '_', ':', '-', starting with a letter or digit"
)

_IDEMPOTENCY_KEY = re.compile(r"[\x20-\x7e]{1,255}")


def check_idempotency_key(key: object) -> str:
    """Return ``key`` if it is a valid idempotency key (1-255 printable ASCII characters).

    Raises:
        UsageError: for anything else.
    """
    if not isinstance(key, str) or _IDEMPOTENCY_KEY.fullmatch(key) is None:
        raise UsageError("an idempotency key must be 1-255 printable ASCII characters")
    return key


def _key_digest(*parts: str) -> str:
    import hashlib  # here, not at the top: as uuid above, only runs with a key need it

    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()


def keyed_session_id(key: str) -> str:
    """The session of a run requested with idempotency key ``key`` and no session id.

    ``k-`` and the SHA-256 of the key: a fresh session id (:func:`new_session_id`, plain hex)
    never has that form.
    """
    return "k-" + _key_digest("session", key)


def keyed_run_id(session_id: str, key: str) -> str:
    """The run id of the run requested with idempotency key ``key`` in session ``session_id``.

    ``k-`` and the SHA-256 of both: two keys (or one key in two sessions) never name one
    run, and a run started without a key (a random hex id) never has this form.
    """
    return "k-" + _key_digest("run", session_id, key)
