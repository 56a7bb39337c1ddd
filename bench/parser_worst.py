"""Worst-case inputs for the classification parser: is the time linear in the reply's length?

Each shape is an adversarial reply (long whitespace runs, unclosed fences, comma runs,
nested braces, ...) built at 1 KB, 10 KB and 100 KB. For each size the parser runs in
blocks (enough calls per block for about a millisecond of work), and the median block over
``--repeat`` blocks is reported as µs per KB. Linear time shows as a flat µs/KB row and a
100 KB / 1 KB time ratio near 100.

Goals (issue 15): ratio <= 150 for every shape and no 100 KB input over 20 ms. Rows that
miss a goal are flagged; ``--check`` makes them exit with status 1.

Times are CPU time of this process by default (``--clock wall`` for elapsed time): the
machine the figures come from is shared, and CPU time is less inflated by the others' load.

Usage: ``python bench/parser_worst.py [--repeat N] [--sizes 1,10,100] [--shape NAME] [--clock cpu|wall] [--check]``
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from jeeves_router import parse_classification

ROUTES = ("billing", "technical", "general")
KB = 1024
GOAL_RATIO = 150.0
GOAL_100KB_MS = 20.0


def _fill(head: str, unit: str, tail: str, size: int) -> str:
    """``head`` + whole ``unit``s + space padding + ``tail``: exactly ``size`` characters."""
    room = max(0, size - len(head) - len(tail))
    return head + unit * (room // len(unit)) + " " * (room % len(unit)) + tail


#: name -> (builder of an input of the given size, what it exercises)
SHAPES: dict[str, tuple[Callable[[int], str], str]] = {
    "key_then_spaces": (lambda n: _fill("route", " ", "x", n), "issue: 'route' + spaces + 'x'"),
    "value_then_spaces": (lambda n: _fill("route: billing", " ", "x", n), "issue: value + spaces + 'x'"),
    "json_fences": (lambda n: _fill("", "```json {", "", n), "issue: '```json {' repeated"),
    "space_commas": (lambda n: _fill("route: billing", " ,", "", n), "issue: value + ' ,' repeated"),
    "spaces": (lambda n: _fill("", " ", "", n), "one whitespace run"),
    "mixed_whitespace": (lambda n: _fill("route:", " \t\f\v", "billing", n), "whitespace kinds after a key"),
    "newlines": (lambda n: _fill("route: billing\nconfidence: 0.9", "\n", "", n), "a valid reply + newlines"),
    "crlf_lines": (lambda n: _fill("", "x\r\n", "route: billing", n), "short CRLF lines"),
    "commas": (lambda n: _fill("route: billing", ",", "x", n), "a comma run inside a value"),
    "fenced_reply": (
        lambda n: _fill("```json\n", " ", '{"route": "billing", "confidence": 0.9}\n```', n),
        "a fenced object after padding",
    ),
    "nested_braces": (lambda n: _fill("", "{", "", n), "'{' repeated"),
    "nested_objects": (lambda n: _fill("", '{"a":', "", n), "unclosed nested JSON objects"),
    "open_strings": (lambda n: _fill("", '{"', "", n), "'{\"' repeated (decode attempts)"),
    "many_objects": (lambda n: _fill("", '{"a":1}', "", n), "small complete objects"),
    "big_object": (
        lambda n: _fill('{"route": "billing", "confidence": 0.9, "x": [', '{"a": 1},', "0]}", n),
        "one object holding many objects",
    ),
    "route_lines": (lambda n: _fill("", "route: billing\n", "confidence: 0.9", n), "the same route line repeated"),
    "key_words": (lambda n: _fill("", "route ", "", n), "key words without separators"),
    "prefixed_keys": (lambda n: _fill("x" * (n // 2), " route:", "", n), "key words after text on one line"),
    "long_number": (lambda n: _fill("route: billing\nconfidence: 0.", "9", "", n), "a very long confidence"),
    "emphasis": (lambda n: _fill("**route", "*", ": billing", n), "emphasis between key and ':'"),
    "zero_width": (lambda n: _fill("route: bill", "\u200b", "ing", n), "zero-width characters in a name"),
}


def measure(text: str, repeat: int, clock: Callable[[], float]) -> float:
    """Median seconds per call over ``repeat`` blocks of about 2 ms of calls each."""
    parse_classification(text, ROUTES)  # warm-up
    t0 = clock()
    parse_classification(text, ROUTES)
    one = max(clock() - t0, 1e-7)
    calls = max(1, min(2000, int(0.002 / one)))
    blocks = []
    for _ in range(repeat):
        t0 = clock()
        for _ in range(calls):
            parse_classification(text, ROUTES)
        blocks.append((clock() - t0) / calls)
    return statistics.median(blocks)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the table; returns the exit status."""
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=f"Goals: 100 KB / 1 KB time ratio <= {GOAL_RATIO:.0f} per shape, no 100 KB input over "
        f"{GOAL_100KB_MS:.0f} ms. Shapes: see --list.",
    )
    ap.add_argument("--repeat", type=int, default=7, help="blocks per size; the median is reported (default 7)")
    ap.add_argument("--sizes", default="1,10,100", help="input sizes in KB, comma-separated (default 1,10,100)")
    ap.add_argument(
        "--shape", action="append", choices=sorted(SHAPES), metavar="NAME", help="only this shape (repeatable)"
    )
    ap.add_argument("--list", action="store_true", help="list the shapes and exit")
    ap.add_argument("--check", action="store_true", help="exit 1 when a row misses a goal")
    ap.add_argument(
        "--clock",
        choices=("cpu", "wall"),
        default="cpu",
        help="cpu: this process's CPU time (default; other processes on the machine inflate it less); "
        "wall: elapsed time",
    )
    args = ap.parse_args(argv)
    if args.list:
        for name, (_, what) in SHAPES.items():
            print(f"{name:18} {what}")
        return 0
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    load = os.getloadavg()
    print(f"parser_worst: Python {platform.python_version()}, {os.cpu_count()} CPUs, load average {load[0]:.2f}")
    print(
        f"{args.clock} time, median of {args.repeat} blocks; µs per KB at each size; "
        "ratio = time at the largest / time at the smallest size\n"
    )
    head = f"{'shape':18}" + "".join(f"{f'{s} KB µs/KB':>14}" for s in sizes) + f"{'largest ms':>12}{'ratio':>8}  flag"
    print(head)
    print("-" * len(head))
    missed = 0
    for name in args.shape or list(SHAPES):
        build = SHAPES[name][0]
        secs = [measure(build(s * KB), args.repeat, clock) for s in sizes]
        ratio = secs[-1] / secs[0] if len(secs) > 1 else 1.0
        largest_ms = secs[-1] * 1e3
        flags = []
        if len(sizes) > 1 and sizes[-1] == 100 * sizes[0] and ratio > GOAL_RATIO:
            flags.append(f"ratio>{GOAL_RATIO:.0f}")
        if sizes[-1] >= 100 and largest_ms > GOAL_100KB_MS:
            flags.append(f">{GOAL_100KB_MS:.0f}ms")
        missed += bool(flags)
        row = "".join(f"{t * 1e6 / s:14.2f}" for t, s in zip(secs, sizes, strict=True))
        print(f"{name:18}{row}{largest_ms:12.3f}{ratio:8.1f}  {' '.join(flags) or 'ok'}")
    print(f"\n{missed} shape(s) missed a goal; load average after the run {os.getloadavg()[0]:.2f}")
    return 1 if missed and args.check else 0


if __name__ == "__main__":
    raise SystemExit(main())
