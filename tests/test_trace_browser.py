"""The trace page in a real headless Chromium: it renders, runs its script without console errors, shows the decision.

Needs Debian's ``chromium`` (``apt-get install -y chromium``). Without it the tests skip,
except under ``CI=true``, where they fail. ``JEEVES_UPDATE_DOCS=1`` also writes the
screenshot to ``docs/trace.png`` (the picture in the README).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.test_trace_page import write_page

ROOT = Path(__file__).resolve().parents[1]
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--enable-logging=stderr",
    "--v=0",
]


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is required in CI (apt-get install -y chromium)")
        pytest.skip(
            "chromium is not installed (apt-get install -y chromium); the trace page was not checked in a browser"
        )
    return found


def run_chromium(tmp_path: Path, url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    return subprocess.run(
        [chromium(), *FLAGS, f"--user-data-dir={profile}", *extra, url],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def console_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


def test_console_errors_are_detected(tmp_path: Path) -> None:
    page = tmp_path / "bad.html"
    page.write_text("<!DOCTYPE html><p>x</p><script>console.error('boom'); missing();</script>")
    proc = run_chromium(tmp_path, page.as_uri(), "--dump-dom")
    lines = console_lines(proc.stderr)
    assert any("boom" in line for line in lines) and any("missing is not defined" in line for line in lines)


def test_trace_page_renders_without_console_errors_and_shows_the_decision(tmp_path: Path) -> None:
    write_page(tmp_path)
    page = tmp_path / "trace.html"
    proc = run_chromium(tmp_path, page.as_uri(), "--dump-dom")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert console_lines(proc.stderr) == []
    dom = proc.stdout
    assert 'data-ready="1"' in dom  # the page's script ran to its end
    assert '<b class="chosen-route">billing</b> with confidence <b>0.820</b> against threshold <b>0.6</b>' in dom
    assert "Agent graph" in dom

    shot = tmp_path / "trace.png"
    proc = run_chromium(tmp_path, page.as_uri(), f"--screenshot={shot}", "--window-size=1200,1500")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert console_lines(proc.stderr) == []
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1200, 1500)
    if os.environ.get("JEEVES_UPDATE_DOCS") == "1":
        (ROOT / "docs").mkdir(exist_ok=True)
        shutil.copyfile(shot, ROOT / "docs" / "trace.png")
