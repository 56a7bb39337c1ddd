"""Start-up cost: whole processes, timed from outside, median of N, interleaved.

Each command is a fresh interpreter: the bare interpreter, ``import jeeves_router``, the
names an application imports (``Agent``, ``Router``, ``RouterRoute``), a script that builds a
routed desk and runs it once on fake models, the ``jeeves-router route "..."`` command, and
the floors under that command (``import numpy, onnxruntime``; the CLI framework; both with the
encoder's session and one query). Commands run in turn (A B C ... A B C ...), so a drift of the
machine's speed touches all of them; wall and CPU (user + sys) milliseconds are reported with
the load average before and after.

``--baseline PATH`` runs every jeeves_router command a second time with ``PYTHONPATH=PATH``
(another checkout, e.g. the previous release) in the same rounds. Byte-code is compiled first, for
the checkouts and for site-packages (as ``pip install`` does; see ``_bytecode.py``), so no run pays
for compiling.

Usage: ``python bench/startup.py [N] [--baseline PATH]`` (N runs per command, default 20)
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _bytecode import compile_for_startup

ROOT = Path(__file__).resolve().parents[1]

FIRST_RUN = """
import anyio
from jeeves_router import Agent, Router, RouterRoute
from jeeves_router.messages import TextPart
from jeeves_router.models.base import ModelResponse, ModelTextDelta
from jeeves_router.usage import Usage

class Canned:
    name = "bench:canned"
    def __init__(self, text):
        self._response = ModelResponse((TextPart(text),), Usage(requests=1), "end", "canned")
    async def request(self, request):
        return self._response
    async def stream(self, request):
        yield ModelTextDelta(self._response.text)
        yield self._response

billing = Agent("Billing.", name="billing", model=Canned("Refunded."))
general = Agent("General.", name="general", model=Canned("Hello."))
desk = Agent("Desk.", name="desk", model=Canned("route: billing\\nconfidence: 0.9"),
             architecture=Router([RouterRoute("billing", billing), RouterRoute("general", general)]))
assert anyio.run(desk.run, "I was charged twice").output == "Refunded."
"""


#: What ``route`` cannot avoid in a fresh process: its command-line framework (typer below 0.29,
#: which does not load pydantic, and rich), numpy (with one BLAS thread, as ``route`` starts it)
#: and onnxruntime, the encoder's session and one encoded query.
ROUTE_FLOOR = """
import os
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import typer, rich.console, rich.table
from jeeves_router.classify.embedding.encoders import MiniLMEncoder
MiniLMEncoder(intra_op_threads=1).encode(["I was charged twice"])
"""


def route_command() -> list[str]:
    """The installed ``jeeves-router`` script, or the module when it is not on PATH."""
    script = shutil.which("jeeves-router")
    base = [script] if script else [sys.executable, "-m", "jeeves_router.cli"]
    return [*base, "route", "I was charged twice"]


def commands() -> dict[str, tuple[list[str], bool]]:
    """Label -> (argv, whether it runs this package's code)."""
    py = sys.executable
    return {
        "python -c pass": ([py, "-c", "pass"], False),
        "import jeeves_router": ([py, "-c", "import jeeves_router"], True),
        "from jeeves_router import Agent, Router, RouterRoute": (
            [py, "-c", "from jeeves_router import Agent, Router, RouterRoute"],
            True,
        ),
        "first routed run (script, fake models)": ([py, "-c", FIRST_RUN], True),
        'jeeves-router route "..."': (route_command(), True),
        "floor: import numpy, onnxruntime": ([py, "-c", "import numpy, onnxruntime"], False),
        "floor: import typer, rich (the CLI framework)": (
            [py, "-c", "import typer, rich.console, rich.table"],
            False,
        ),
        "floor: CLI framework + encoder session + one query": ([py, "-c", ROUTE_FLOOR], False),
    }


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU milliseconds of one run (CPU: the child's user + sys).

    The run starts in the checkout it measures: ``python -c`` puts the current folder first
    on ``sys.path``, ahead of ``PYTHONPATH``.
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, cwd=env["PYTHONPATH"])
    wall = (time.perf_counter() - start) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"startup.py: {argv[:3]} failed: {proc.stderr.decode()[-400:]}")
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    return wall, cpu


def main() -> None:
    """Parse the options, run every command N times in rounds, print the medians."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("n", nargs="?", type=int, default=20, help="runs per command (default 20)")
    parser.add_argument("--baseline", type=Path, help="another checkout to time beside this one")
    opts = parser.parse_args()
    if opts.n < 1:
        parser.error(f"N must be a positive number of runs, got {opts.n}")
    trees = {"": ROOT} | ({" [baseline]": opts.baseline.resolve()} if opts.baseline else {})
    compile_for_startup(*(tree / "jeeves_router" for tree in trees.values()))
    runs: dict[str, tuple[list[str], dict[str, str]]] = {}
    for label, (argv, ours) in commands().items():
        for suffix, tree in trees.items() if ours else [("", ROOT)]:
            runs[label + suffix] = (argv, {**os.environ, "PYTHONPATH": str(tree)})
    for argv, env in runs.values():  # warm-up: file cache, the quantized model's cache
        timed(argv, env)
    results: dict[str, list[tuple[float, float]]] = {label: [] for label in runs}
    load_before = os.getloadavg()
    for _ in range(opts.n):
        for label, (argv, env) in runs.items():
            results[label].append(timed(argv, env))
    load_after = os.getloadavg()
    loads = f"before {load_before[0]:.2f} {load_before[1]:.2f}, after {load_after[0]:.2f} {load_after[1]:.2f}"
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, N={opts.n} per command; load average {loads}")
    print(f"{'command':62s} {'wall ms':>8s} {'(min)':>6s} {'cpu ms':>8s}")
    for label, rows in results.items():
        walls, cpus = [w for w, _ in rows], [c for _, c in rows]
        print(f"{label:62s} {statistics.median(walls):8.0f} {min(walls):6.0f} {statistics.median(cpus):8.0f}")


if __name__ == "__main__":
    main()
