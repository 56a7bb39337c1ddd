"""The console command ends its process without the interpreter's teardown, and loses nothing by it.

``jeeves_router.cli._exit.leave`` flushes the standard streams and runs the ``atexit`` handlers, then
ends the process at once; it exits normally while another non-daemon thread runs or a stream
cannot be flushed. Each case runs in a child interpreter.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LEAVE = "from jeeves_router.cli._exit import leave\n"


def run(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", code, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


#: An object whose finaliser runs only when the interpreter tears its modules down.
TORN_DOWN = """
import atexit, sys
class Witness:
    def __del__(self):
        sys.stdout.write("torn down\\n")
witness = Witness()
atexit.register(lambda: sys.stdout.write("atexit ran\\n"))
"""


def test_leave_flushes_runs_atexit_and_skips_the_teardown() -> None:
    proc = run(TORN_DOWN + "sys.stdout.write('buffered, no newline')\n" + LEAVE + "leave(3)")
    assert proc.returncode == 3
    assert proc.stdout == "buffered, no newlineatexit ran\n"  # flushed, handler run, no teardown


def test_leave_gives_a_message_status_1_and_prints_it_as_sys_exit_does() -> None:
    proc = run(LEAVE + "leave('cannot go on')")
    assert (proc.returncode, proc.stderr) == (1, "cannot go on\n")
    assert run(LEAVE + "leave(None)").returncode == 0


def test_leave_exits_normally_while_another_thread_still_runs() -> None:
    code = """
import sys, threading
from jeeves_router.cli._exit import leave
gate = threading.Event()
worker = threading.Thread(target=lambda: (gate.wait(), sys.stdout.write("worker finished\\n")))
worker.start()
try:
    leave(4)
except SystemExit:
    sys.stdout.write("fell back\\n")
    gate.set()
    raise
"""
    proc = run(code)
    assert proc.returncode == 4
    assert proc.stdout == "fell back\nworker finished\n"  # the normal exit waited for the worker


def test_the_console_command_skips_the_teardown_and_keeps_its_exit_status() -> None:
    ok = run(TORN_DOWN + "sys.argv = ['jeeves-router', '--help']\nfrom jeeves_router.cli import main\nmain()")
    assert ok.returncode == 0, ok.stderr
    assert "Usage" in ok.stdout and ok.stdout.endswith("atexit ran\n") and "torn down" not in ok.stdout

    bad = run(TORN_DOWN + "sys.argv = ['jeeves-router', 'route', '--threshold', '7', 'hi']\n"
              "from jeeves_router.cli import main\nmain()")  # fmt: skip
    assert bad.returncode == 2
    assert bad.stderr.strip().count("\n") == 0 and "--threshold" in bad.stderr  # one line, as before
    assert bad.stdout == "atexit ran\n"


def test_the_installed_command_is_the_one_that_leaves_fast() -> None:
    lines = (ROOT / "pyproject.toml").read_text(encoding="utf-8").splitlines()
    scripts = lines[lines.index("[project.scripts]") + 1 :]
    assert 'jeeves-router = "jeeves_router.cli:main"' in scripts[: scripts.index("")]


def test_a_reader_that_goes_away_ends_the_command_quietly() -> None:
    """``jeeves-router route - < requests | head``: no error line once stdout's reader has gone."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for args in (["route", "-"], ["route", "I was charged twice"]):
        proc = subprocess.Popen(
            [sys.executable, "-m", "jeeves_router.cli", *args],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert proc.stdout is not None and proc.stdin is not None
        proc.stdout.close()  # the reader is gone before the command writes
        _, err = proc.communicate(b"I was charged twice\n" * 50, timeout=120)
        assert proc.returncode == 1, err
        assert b"error" not in err and b"Traceback" not in err and b"Exception ignored" not in err


def test_leave_exits_normally_when_a_stream_cannot_be_flushed() -> None:
    """The normal exit then reports the lost output (status 120), instead of ending as if all were written."""
    code = "import os, sys\n" + LEAVE + "sys.stdout.write('pending')\nos.close(1)\nleave(0)"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # stdout holds 'pending' until flushed
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 120
    assert "Exception ignored" in proc.stderr
