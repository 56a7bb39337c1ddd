"""Byte-code for start-up benchmarks: compile it first, as ``pip install`` does.

pip compiles every installed module to ``.pyc`` at install time; uv does not unless asked
(``--compile-bytecode``), and an environment with ``PYTHONDONTWRITEBYTECODE=1`` (this
project's sandboxes set it) never writes it on import either. Without it, every start-up
compiles numpy, onnxruntime, typer and rich from source again, which made
``jeeves-router route`` take 419 ms instead of 286 ms on one machine, a wait no user who
installed with pip has after the first run. Start-up benchmarks call :func:`compile_for_startup` first.
"""

from __future__ import annotations

import compileall
import sys
import sysconfig
from pathlib import Path


def compile_for_startup(*trees: Path) -> list[str]:
    """Compile ``trees`` and this interpreter's site-packages to byte-code (quietly, once).

    Already compiled files are skipped by their time stamps, so later runs cost little.

    Returns:
        The folders compiled, for the benchmark's header.
    """
    folders = {Path(sysconfig.get_paths()[key]) for key in ("purelib", "platlib")} | set(trees)
    done = []
    for folder in sorted(folders):
        if folder.is_dir():
            compileall.compile_dir(str(folder), quiet=2, workers=0)
            done.append(str(folder))
    return done


if __name__ == "__main__":
    print("\n".join(compile_for_startup(*(Path(p) for p in sys.argv[1:]))))
