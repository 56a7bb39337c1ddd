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

from ._app import app, main

__all__ = ["app", "main"]
