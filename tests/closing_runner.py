"""Runs user-facing code and reports the SQLite connections it left open (not a test module).

Run as a script, by ``tests/test_examples_close_journals.py``::

    python -W error::ResourceWarning tests/closing_runner.py readme BLOCKS.json
    python -W error::ResourceWarning tests/closing_runner.py script examples/serve_desk.py ARGS...

``readme`` runs README blocks (a JSON list of sources, top-level ``await`` allowed) one after
the other in one namespace, on one event loop, with ``"provider:model"`` strings resolving to
test models (``tests/readme_text.py``, as ``tests/test_readme_runs.py`` runs them). ``script`` runs a file as
``__main__`` (a ``KeyboardInterrupt``, the way a served example is stopped, ends it normally).

Every ``sqlite3`` connection opened is tracked; at the end the code's namespace is dropped and
collected, and the runner prints ``unclosed connections: N``, counting those still open and
those collected open. Python 3.13 also warns (``ResourceWarning``) for each one collected open.
"""

from __future__ import annotations

import ast
import asyncio
import gc
import inspect
import json
import runpy
import sqlite3
import sys
import weakref
from pathlib import Path
from typing import Any

_connect = sqlite3.connect
_live: weakref.WeakSet[_Tracked] = weakref.WeakSet()
_collected_open = 0


class _Tracked(sqlite3.Connection):
    """A connection that knows whether it was closed."""

    _closed = False

    def close(self) -> None:
        self._closed = True
        super().close()

    def __del__(self) -> None:
        global _collected_open
        if not self._closed:
            _collected_open += 1
        base_del = getattr(super(), "__del__", None)  # Python 3.13's: the ResourceWarning of an open one
        if base_del is not None:
            base_del()


def _tracked_connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
    kwargs.setdefault("factory", _Tracked)
    conn = _connect(*args, **kwargs)
    if isinstance(conn, _Tracked):
        _live.add(conn)
    return conn


def _readme(blocks_file: str) -> None:
    from jeeves_router.models import registry
    from tests.readme_text import provider_stand_ins

    registry._CUSTOM = provider_stand_ins()
    namespace: dict[str, Any] = {}
    sources = json.loads(Path(blocks_file).read_text(encoding="utf-8"))
    codes = [compile(s, "README.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT) for s in sources]

    async def main() -> None:
        for code in codes:
            result = eval(code, namespace)  # the README's own code
            if inspect.iscoroutine(result):
                await result

    asyncio.run(main())
    namespace.clear()


def _script(path: str, argv: list[str]) -> None:
    sys.argv = [path, *argv]
    try:
        runpy.run_path(path, run_name="__main__")
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sqlite3.connect = _tracked_connect
    mode, target, *rest = sys.argv[1:]
    if mode == "readme":
        _readme(target)
    else:
        _script(target, rest)
    gc.collect()
    still_open = sum(1 for conn in _live if not conn._closed)
    print(f"unclosed connections: {still_open + _collected_open}", file=sys.stderr, flush=True)
