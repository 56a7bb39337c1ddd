"""Ending the command-line process without taking the interpreter apart.

When a command is done, a normal exit still frees every object and module one by one and runs
the native libraries' own teardown (onnxruntime's and numpy's): about 45 ms of the 300 ms that
``jeeves-router route TEXT`` takes. Nothing the command did needs that. :func:`leave` does what
a normal exit does that matters (it flushes the standard streams and runs the ``atexit``
handlers, ``logging.shutdown`` among them) and then ends the process at once, as mypy's
command line does. It falls back to a normal exit when that would do more: while another
non-daemon thread is running (a normal exit waits for it) or when a stream cannot be flushed
(a normal exit reports that).
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import NoReturn

__all__ = ["leave"]


def _status(code: object) -> int:
    """The exit status a normal exit gives for ``SystemExit(code)``; a message is printed as it would be."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _others_running() -> bool:
    main = threading.main_thread()
    return any(t is not main and not t.daemon and t.is_alive() for t in threading.enumerate())


def _flush() -> bool:
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):  # a closed pipe or a closed stream
        return False
    return True


def leave(code: object = None) -> NoReturn:
    """End the process with ``code`` (as ``sys.exit(code)`` would), skipping the interpreter's teardown.

    Args:
        code: What ``SystemExit`` carries: ``None`` (0), an exit status, or a message (printed
            to stderr; status 1).

    Raises:
        SystemExit: Instead of ending the process at once, when another non-daemon thread is
            still running or a standard stream cannot be flushed.
    """
    if _others_running() or not _flush():
        raise SystemExit(code)
    status = _status(code)
    atexit._run_exitfuncs()  # the handlers a normal exit runs; it clears them, so none runs twice
    _flush()
    os._exit(status)
