"""Reading a stored entry back, and telling a newer release's entry from a damaged one.

A schema version or a record type this release does not know was written by a newer release
(one journal shared by servers upgraded one at a time): that is a :class:`JournalError`
saying to upgrade, never skipped, since any record may decide how a run went. What is no
entry at all is :class:`JournalCorrupt`.
"""

from __future__ import annotations

import json

from pydantic import ValidationError

from .records import _READABLE_VERSIONS, RECORD_TYPES, SCHEMA_VERSION, Entry, JournalCorrupt, JournalError

__all__ = ["check_file_version", "decode_entry"]


def decode_entry(body: str, *, seq: int, journal: str, session_id: str) -> Entry:
    """The entry a journal stored as ``body`` at ``seq``, with its ``seq``.

    Args:
        body: What :meth:`Entry.body` wrote (maybe a newer release's).
        seq: Its position in the journal.
        journal: The journal, as messages name it (``journal runs.db``).
        session_id: Its session, for messages.

    Raises:
        JournalError: It was written by a newer release (a schema version or a record type
            this release does not know): upgrade.
        JournalCorrupt: It is not an entry.
    """
    entry_at = f"{journal}: entry {seq} (session {session_id!r})"
    try:
        entry = Entry.from_body(body)
    except ValidationError as exc:
        newer = _newer_than_this_release(body)
        if newer is not None:
            raise JournalError(_upgrade(entry_at, newer)) from None
        raise JournalCorrupt(f"{entry_at} is not a valid entry: {exc.errors()[0]['msg']}") from exc
    if entry.v > SCHEMA_VERSION:  # it parsed, but may mean something else than this release reads
        raise JournalError(_upgrade(entry_at, _version(entry.v)))
    if entry.v not in _READABLE_VERSIONS:
        raise JournalCorrupt(f"{entry_at} has schema version {entry.v}, which no release writes")
    return entry.model_copy(update={"seq": seq})


def check_file_version(value: str, *, journal: str) -> None:
    """Refuse a journal file whose schema version (SQLite's ``meta`` table) this release cannot read.

    Raises:
        JournalError: A newer release's version: upgrade.
        JournalCorrupt: A value no release writes.
    """
    v = int(value) if value.isascii() and value.isdigit() else 0
    if v > SCHEMA_VERSION:
        raise JournalError(f"{journal} was written by a newer jeeves-router: {_version(v)}; upgrade jeeves-router")
    if v not in _READABLE_VERSIONS:
        raise JournalCorrupt(f"{journal} has schema version {value!r}, which no release writes (a damaged file)")


def _version(v: int) -> str:
    return f"schema version {v}, which this release does not know (it reads versions {sorted(_READABLE_VERSIONS)})"


def _upgrade(entry_at: str, what: str) -> str:
    return f"{entry_at} was written by a newer jeeves-router: {what}; upgrade jeeves-router to read this journal"


def _newer_than_this_release(body: str) -> str | None:
    """What in an entry that does not parse says a newer release wrote it (``None``: nothing, it is damaged)."""
    try:
        data = json.loads(body)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    v, record = data.get("v"), data.get("record")
    if isinstance(v, int) and not isinstance(v, bool) and v > SCHEMA_VERSION:
        return _version(v)
    kind = record.get("type") if isinstance(record, dict) else None
    if isinstance(kind, str) and kind not in RECORD_TYPES:
        return f"record type {kind!r}, which this release does not know"
    return None
