r"""Reading route files and labelled data for evaluation and fitting.

Route files are JSON: a list of ``{"name", "description", "examples"}`` (or an object with a
``"routes"`` list and, optionally, a ``"negatives"`` list of out-of-scope requests; ``"utterances"``
is read as ``"examples"``). Labelled data is JSONL, one ``{"text": ..., "route": ...}`` per
line, with ``route: "oos"`` for out-of-scope rows. Bad input raises :class:`DataFileError`,
whose message names the file and the line. Route names follow the one route-table rule,
:func:`jeeves_router.ids.validate_route_names`.

Text read is valid Unicode (:mod:`jeeves_router._text`): standard input's bytes that are not
UTF-8, and JSON escapes of an unpaired UTF-16 surrogate (``"\ud83d"``, half of an emoji),
become U+FFFD. A file that is not UTF-8 is refused.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._text import valid_json, valid_text
from ..classify.types import RouteSpec
from ..errors import UsageError
from ..ids import check_oos_label, validate_route_names

__all__ = [
    "DataFileError",
    "LabelledRow",
    "read_text",
    "load_routes",
    "load_negatives",
    "load_labelled",
    "check_labels",
]


class DataFileError(UsageError):
    """A route or data file is missing or malformed.

    Attributes:
        path: The file.
        line: The 1-based line, when known.
    """

    def __init__(self, path: str | Path, message: str, *, line: int | None = None) -> None:
        self.path, self.line = str(path), line
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True, slots=True)
class LabelledRow:
    """One labelled request: its text, expected route (or the OOS label) and file line."""

    text: str
    label: str
    line: int


def stdin_text() -> str:
    """Standard input's text, read as UTF-8 whatever the locale; bytes that are not UTF-8 become U+FFFD."""
    raw = getattr(sys.stdin, "buffer", None)
    if raw is None:  # a text-only stream put in its place (tests, embedding hosts)
        return valid_text(sys.stdin.read())
    data: bytes = raw.read()
    return data.decode("utf-8", "replace")


def read_text(path: str | Path) -> str:
    """A UTF-8 file's text; :class:`DataFileError` when it is missing or unreadable.

    ``"-"`` reads standard input (:func:`stdin_text`), as command-line tools do
    (``route --data -``, ``eval --data -``).
    """
    if str(path) == "-":
        return stdin_text()
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise DataFileError(p, "file not found") from None
    except UnicodeDecodeError as exc:
        byte = exc.object[exc.start : exc.start + 1].hex()
        raise DataFileError(
            p, f"not UTF-8 text (byte 0x{byte} at offset {exc.start}): save the file as UTF-8", line=_line_of(exc)
        ) from None
    except IsADirectoryError:
        raise DataFileError(p, "is a folder, not a file: name the file in it") from None
    except PermissionError:
        raise DataFileError(p, "cannot read the file (permission denied): make it readable") from None


def _line_of(exc: UnicodeDecodeError) -> int:
    """The 1-based line of the byte that is not UTF-8."""
    return bytes(exc.object[: exc.start]).count(b"\n") + 1


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def decode_json(text: str) -> Any:
    """``json.loads(text)``, its strings made valid Unicode (an escaped unpaired surrogate becomes U+FFFD).

    Raises:
        json.JSONDecodeError: For text that is not JSON.
    """
    data = json.loads(text)
    return valid_json(data) if _SURROGATE_ESCAPE.search(text) else data


def load_routes(path: str | Path) -> tuple[RouteSpec, ...]:
    """Read a route file (see the module docstring)."""
    text = read_text(path)
    try:
        data = decode_json(text)
    except json.JSONDecodeError as exc:
        raise DataFileError(path, f"invalid JSON: {exc.msg}", line=exc.lineno) from None
    items = data.get("routes") if isinstance(data, dict) else data
    if not isinstance(items, list) or not items:
        raise DataFileError(path, 'expected a non-empty list of routes (or {"routes": [...]})')
    routes: list[RouteSpec] = []
    for i, item in enumerate(items, 1):
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"].strip():
            raise DataFileError(path, f'route #{i} needs a "name" string')
        examples = item.get("examples", item.get("utterances", []))
        desc = item.get("description", "")
        if not isinstance(desc, str) or not isinstance(examples, list) or not all(isinstance(e, str) for e in examples):
            raise DataFileError(
                path, f'route {item["name"]!r}: "description" must be a string, "examples" a list of strings'
            )
        routes.append(RouteSpec(item["name"], desc, tuple(examples)))
    try:
        validate_route_names([r.name for r in routes], owner="route file")
    except UsageError as exc:
        raise DataFileError(path, str(exc).removeprefix("route file: ")) from None
    return tuple(routes)


def load_negatives(path: str | Path) -> tuple[str, ...]:
    """The ``"negatives"`` list of a route file in its ``{"routes": [...]}`` form (else empty).

    Negatives are out-of-scope example requests, used by the ``late`` scorer to learn what
    to reject.
    """
    try:
        data = decode_json(read_text(path))
    except json.JSONDecodeError as exc:
        raise DataFileError(path, f"invalid JSON: {exc.msg}", line=exc.lineno) from None
    items = data.get("negatives", []) if isinstance(data, dict) else []
    if not isinstance(items, list) or not all(isinstance(t, str) for t in items):
        raise DataFileError(path, '"negatives" must be a list of strings')
    return tuple(items)


def jsonl_values(path: str | Path) -> Iterator[tuple[int, Any]]:
    """``(line number, decoded value)`` for each non-blank line of a JSONL file.

    Raises:
        DataFileError: naming the file and line of the first line that is not JSON.
    """
    for n, line in enumerate(read_text(path).splitlines(), 1):
        if not line.strip():
            continue
        try:
            yield n, decode_json(line)
        except json.JSONDecodeError as exc:
            raise DataFileError(path, f"invalid JSON: {exc.msg} (column {exc.colno})", line=n) from None


def load_labelled(path: str | Path, *, text_field: str = "text", label_field: str = "route") -> list[LabelledRow]:
    """Read labelled JSONL rows; blank lines are skipped."""
    rows: list[LabelledRow] = []
    for n, obj in jsonl_values(path):
        if not isinstance(obj, dict):
            raise DataFileError(path, f"expected a JSON object with {text_field!r} and {label_field!r}", line=n)
        text, label = obj.get(text_field), obj.get(label_field)
        if not isinstance(text, str) or not isinstance(label, str):
            raise DataFileError(path, f"{text_field!r} and {label_field!r} must both be strings", line=n)
        rows.append(LabelledRow(text, label, n))
    if not rows:
        raise DataFileError(path, f'no rows: give one {{"{text_field}": ..., "{label_field}": ...}} per line')
    return rows


def check_labels(rows: Sequence[LabelledRow], routes: Sequence[str], *, oos_label: str, path: str | Path) -> None:
    """Raise :class:`DataFileError` at the first row whose label is neither a route nor the OOS label.

    A route named like the OOS label is refused first (:func:`~jeeves_router.ids.check_oos_label`).
    """
    check_oos_label(oos_label, routes)
    known = set(routes)
    for row in rows:
        if row.label != oos_label and row.label not in known:
            raise DataFileError(
                path,
                f"unknown route {row.label!r} (routes: {', '.join(routes)}; out of scope: {oos_label!r})",
                line=row.line,
            )
