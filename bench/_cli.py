"""Command-line options shared by the benchmarks (``--help`` works on every one)."""

from __future__ import annotations

import argparse


def runs_arg(doc: str | None, default: int = 200) -> int:
    """Parse ``[N]`` (runs per contender) from ``sys.argv``; ``--help`` prints the module doc."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("n", nargs="?", type=int, default=default, help=f"runs per contender (default {default})")
    n: int = parser.parse_args().n
    if n < 1:
        parser.error(f"N must be a positive number of runs, got {n}")
    return n
