"""Files written whole or not at all (see :func:`write_whole`)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from .errors import UsageError

__all__ = ["write_whole", "check_output"]


def write_whole(path: str | Path, write: Callable[[BinaryIO], object]) -> Path:
    """Replace ``path`` by what ``write`` writes, atomically: readers see the old file or the new one.

    ``write`` fills a temporary file in the same folder (a name of its own, so concurrent
    writers never share one), which is flushed to disk and then renamed over ``path``. A
    failure or a kill part-way leaves the old file as it was and no temporary file behind (a
    kill leaves one, named ``.<name>.<random>.tmp``); of concurrent writers, the last rename
    wins and the file is always one writer's whole output. A symbolic link at ``path`` is
    written through, as ``open(path, "w")`` would. The new file keeps the permissions of the
    file it replaces; a new file gets what ``open(path, "w")`` would give (0o666 less the
    process's umask; 0o644 where the umask cannot be read).

    Args:
        path: The file to write.
        write: Writes the content into the binary file it is given.

    Returns:
        The path written (a link's target).

    Raises:
        OSError: When the folder cannot be written (the error names ``path``), or writing or
            renaming fails.
    """
    target = Path(os.path.realpath(path))
    try:
        mode = target.stat().st_mode & 0o777
    except OSError:
        mode = _new_file_mode()  # mkstemp's own is owner-only: a cache built in an image is read by other users
    try:
        fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise type(exc)(exc.errno, exc.strerror, str(path)) from exc
    staging = Path(name)
    try:
        with os.fdopen(fd, "wb") as out:
            os.chmod(out.fileno(), mode)
            write(out)
            out.flush()
            os.fsync(out.fileno())  # the data reaches the disk before the name does
        os.replace(staging, target)
    except BaseException:
        with contextlib.suppress(OSError):
            staging.unlink(missing_ok=True)
        raise
    return target


def _new_file_mode() -> int:
    """0o666 less the process's umask, read without changing it (``os.umask`` would, for every thread)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o644


def check_output(path: str | Path, option: str, *, folder: bool = False, suffixes: tuple[str, ...] = ()) -> None:
    """Refuse an output path that could not be written, before the work that produces the output.

    Args:
        path: The file (or, with ``folder``, the folder, created when missing) to write.
        option: The option that named it, for the message (``--out``).
        folder: Whether ``path`` is a folder.
        suffixes: The file suffixes allowed (empty: any).

    Raises:
        UsageError: For a file path that is a folder or in a missing folder, a folder path
            that is a file, or a suffix not in ``suffixes``.
    """
    p = Path(path)
    if folder:
        if p.exists() and not p.is_dir():
            raise UsageError(f"{option} {p}: a file is there, not a folder")
        return
    if p.is_dir():
        raise UsageError(f"{option} {p}: is a folder; name the file to write")
    if not p.absolute().parent.is_dir():
        raise UsageError(f"{option} {p}: the folder {p.parent} does not exist")
    if suffixes and p.suffix.lower() not in suffixes:
        raise UsageError(f"{option} {p}: must end in {' or '.join(suffixes)}")
