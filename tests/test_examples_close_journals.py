"""The README's journal examples and the examples that keep a journal close it when done.

A journal holds a SQLite connection; one left open is closed only when collected, and Python
3.13 warns at exit (``ResourceWarning: unclosed database``). Each example runs in a child
process under ``-W error::ResourceWarning`` (``tests/closing_runner.py``), which counts the
connections left open on any Python version.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.mcp_helpers import listening_ports
from tests.readme_text import python_blocks

ROOT = Path(__file__).resolve().parents[1]
RUNNER = Path(__file__).with_name("closing_runner.py")


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env.pop("PYTHONWARNINGS", None)
    return env


def _check(stderr: str) -> None:
    assert "unclosed connections: 0" in stderr, stderr[-3000:]
    assert "ResourceWarning" not in stderr, stderr[-3000:]


def journal_blocks() -> list[str]:
    """The README's Python blocks that open a journal, after the quick start (its agents are theirs)."""
    blocks = python_blocks()
    return [blocks[0], *(b for b in blocks if re.search(r"\b\w+Journal\(", b))]


def _run_blocks(blocks: list[str], folder: Path) -> subprocess.CompletedProcess[str]:
    source = folder / "blocks.json"
    source.write_text(json.dumps(blocks), encoding="utf-8")
    command = [sys.executable, "-W", "error::ResourceWarning", str(RUNNER), "readme", str(source)]
    return subprocess.run(command, cwd=folder, env=_child_env(), capture_output=True, text=True, timeout=300)


def test_the_readme_journal_examples_close_their_journal(tmp_path: Path) -> None:
    blocks = journal_blocks()
    assert len(blocks) >= 3  # the quick start, then the SQLite journal and the sessions examples
    done = _run_blocks(blocks, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    _check(done.stderr)
    assert (tmp_path / "runs.db").is_file()  # the examples ran and recorded


def test_the_runner_sees_a_journal_left_open(tmp_path: Path) -> None:
    leaky = [
        "from jeeves_router.journal import SQLiteJournal",
        'journal = SQLiteJournal("runs.db")',
        "await journal.sessions()",
    ]
    done = _run_blocks(["\n".join(leaky)], tmp_path)
    assert "unclosed connections: 1" in done.stderr, done.stderr[-3000:]


def test_the_served_example_closes_its_journal_when_stopped(tmp_path: Path) -> None:
    pytest.importorskip("uvicorn")
    journal = tmp_path / "runs.db"
    # port 0, found in /proc: a port picked free and released first could be taken in between
    args = [str(ROOT / "examples" / "serve_desk.py"), "--port", "0", "--journal", str(journal)]
    child = subprocess.Popen(
        [sys.executable, "-W", "error::ResourceWarning", str(RUNNER), "script", *args],
        cwd=tmp_path,
        env=_child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert "serving model 'desk'" in child.stdout.readline()
        deadline = time.monotonic() + 120  # a hang guard: a loaded machine starts Python slowly
        while not (ports := listening_ports(child.pid)):
            assert child.poll() is None, f"the served example exited with {child.returncode}"
            assert time.monotonic() < deadline, "the served example never listened"
            time.sleep(0.05)
        (port,) = ports
        body = {"model": "desk", "messages": [{"role": "user", "content": "I was charged twice"}], "session_id": "s1"}
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback, whatever *_PROXY says
        with direct.open(request, timeout=120) as reply:
            answer = json.loads(reply.read())
        assert "[billing]" in answer["choices"][0]["message"]["content"]
        child.send_signal(signal.SIGINT)
        _, stderr = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate()
    assert journal.is_file()
    _check(stderr)
