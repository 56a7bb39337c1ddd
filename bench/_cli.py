"""Command-line options shared by the benchmarks (``--help`` works on every one)."""

from __future__ import annotations

import argparse


def bench_args(doc: str | None, default: int = 200, flags: dict[str, str] | None = None) -> argparse.Namespace:
    """Parse ``[N] [flags]`` from ``sys.argv``; ``--help`` prints the module doc.

    Args:
        doc: The benchmark's module docstring, shown by ``--help``.
        default: Runs per contender when N is not given.
        flags: Optional boolean flags (``--name`` -> help text), read as ``opts.name``.
    """
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("n", nargs="?", type=int, default=default, help=f"runs per contender (default {default})")
    for flag, text in (flags or {}).items():
        parser.add_argument(flag, action="store_true", help=text)
    opts = parser.parse_args()
    if opts.n < 1:
        parser.error(f"N must be a positive number of runs, got {opts.n}")
    return opts


def runs_arg(doc: str | None, default: int = 200) -> int:
    """Parse ``[N]`` (runs per contender) from ``sys.argv``; ``--help`` prints the module doc."""
    n: int = bench_args(doc, default).n
    return n
