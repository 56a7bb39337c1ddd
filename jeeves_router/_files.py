"""Files written whole or not at all (see :func:`write_whole`)."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

__all__ = ["write_whole"]


def write_whole(path: str | Path, write: Callable[[BinaryIO], object]) -> Path:
    """Replace ``path`` by what ``write`` writes, atomically: readers see the old file or the new one.

    ``write`` fills a temporary file in the same folder (a name of its own, so concurrent
    writers never share one), which is flushed to disk and then renamed over ``path``. A
    failure or a kill part-way leaves the old file as it was and no temporary file behind (a
    kill leaves one, named ``.<name>.<random>.tmp``); of concurrent writers, the last rename
    wins and the file is always one writer's whole output. A symbolic link at ``path`` is
    written through, as ``open(path, "w")`` would. The new file keeps the permissions of the
    file it replaces, else ``0o644``.

    Args:
        path: The file to write.
        write: Writes the content into the binary file it is given.

    Returns:
        The path written (a link's target).

    Raises:
        OSError: When the folder cannot be written; it names ``path``, not the temporary file.
    """
    target = Path(os.path.realpath(path))
    try:
        mode = target.stat().st_mode & 0o777
    except OSError:
        mode = 0o644  # mkstemp's default is owner-only; a file built in an image is read by other users
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
