"""The ``jeeves-router`` command line: route a request, fit and evaluate classifiers, offline.

Heavy imports (numpy, onnxruntime) happen inside the commands, so ``--help`` stays fast and
works without the ``embed`` extra. Bad input exits with code 2 and a message naming the file
and line.

The public face is :data:`app` (the typer app, to run the commands inside a process that goes
on) and :func:`main` (the console command). What lives where:

- ``_app``: the commands, each a thin function that reads its options and calls the library;
- ``_embed``: building, fitting and saving embedded classifiers from route files and data;
- ``_show``: printing a route decision or an evaluation report (rich tables, JSON);
- ``_observe``: ``trace`` and ``graph``; ``_replay``: ``replay``;
- ``_errors``: every error becomes one line and exit code 2, naming the command's options
  through ``flag`` (never spelled by hand);
- ``_exit``: how the console command ends its process.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._app import app

__all__ = ["app", "main"]

#: The command line's own dependencies, which the ``cli`` extra installs (and the ``embed``,
#: ``serve`` and ``mcp`` extras, whose commands they run).
_CLI_EXTRA = ("typer", "click", "rich")


def main() -> None:
    """The ``jeeves-router`` console command (:func:`._app.main`).

    Installed without the ``cli`` extra (``pip install jeeves-router`` alone), it says which
    extra to install, in one line, and exits with status 2 instead of a traceback.
    """
    try:
        from ._app import main as run
    except ModuleNotFoundError as exc:
        missing = (exc.name or "").split(".")[0]
        if missing not in _CLI_EXTRA:
            raise
        print(
            f"error: the jeeves-router command needs the cli extra ({missing} is not installed): "
            "pip install 'jeeves-router[cli]'",
            file=sys.stderr,
        )
        raise SystemExit(2) from None
    run()


def __getattr__(name: str) -> Any:
    if name == "app":  # imported on first use, so main() can name a missing extra
        from ._app import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
