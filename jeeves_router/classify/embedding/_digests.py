"""The SHA-256 of a model file, remembered in the cache folder so a start does not hash 23 MB again."""

from __future__ import annotations

import contextlib
import hashlib
from pathlib import Path

from ..._files import write_whole

__all__ = ["DIGEST_MEMO", "DIGEST_MEMO_ENTRIES", "source_digest"]

#: The file in the cache folder remembering source digests, and how many file versions it keeps.
DIGEST_MEMO = ".source-digests"
DIGEST_MEMO_ENTRIES = 16


def source_digest(source: Path, folder: Path) -> str:
    """The first 16 hex digits of ``source``'s SHA-256, remembered in the cache folder.

    Hashing the 23 MB model costs about 40 ms of CPU on every start, so the digest is kept in
    the cache folder ``folder`` in one file, keyed by the file's path,
    size and modification time (a reinstalled file is hashed again). It keeps the
    :data:`DIGEST_MEMO_ENTRIES` newest versions, so a fresh environment per CI run piles up
    nothing. It is only written into a folder that exists (a failed first build leaves nothing);
    two processes adding at once may drop one's entry, which costs one more hash, never a wrong
    digest.
    """
    st = source.stat()
    key = hashlib.sha256(f"{source.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode()).hexdigest()[:16]
    memo = folder / DIGEST_MEMO
    try:
        lines = memo.read_text(encoding="ascii").splitlines()
    except (OSError, UnicodeDecodeError):
        lines = []
    known = dict(entry for entry in map(_memo_entry, lines) if entry is not None)
    if key in known:
        return known[key]
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    if folder.is_dir():
        kept = [f"{k} {d}" for k, d in known.items()][: DIGEST_MEMO_ENTRIES - 1]
        text = "\n".join([f"{key} {digest}", *kept]) + "\n"
        with contextlib.suppress(OSError):
            write_whole(memo, lambda out: out.write(text.encode("ascii")))
        for old in folder.glob(".digest-*"):  # one file per version, before DIGEST_MEMO
            with contextlib.suppress(OSError):
                old.unlink()
    return digest


def _memo_entry(line: str) -> tuple[str, str] | None:
    """``(key, digest)`` from a line of :data:`DIGEST_MEMO`; None for a damaged line."""
    parts = line.split(" ")
    if len(parts) == 2 and all(len(p) == 16 and all(c in "0123456789abcdef" for c in p) for p in parts):
        return parts[0], parts[1]
    return None
