"""The benchmarks answer ``--help`` (and reject a bad run count) before importing their peers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("script", ["overhead.py", "journal_overhead.py", "mcp_tools.py"])
def test_help_prints_usage(script: str) -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), "--help"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage:")
    assert "runs per contender" in proc.stdout


@pytest.mark.parametrize("arg", ["0", "ten"])
def test_bad_run_count_is_one_line_exit_2(arg: str) -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "overhead.py"), arg], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "overhead.py: error:" in proc.stderr
