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
from typing import Any

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


def test_agent_graphs_parse_and_render_in_real_mermaid(tmp_path: Path) -> None:
    """Optional: ``JEEVES_MERMAID_JS=/path/to/mermaid.min.js`` (``npm install mermaid@11``) renders every graph."""
    script = os.environ.get("JEEVES_MERMAID_JS")
    if not script:
        pytest.skip("set JEEVES_MERMAID_JS to a local mermaid.min.js to render the graphs with Mermaid itself")
    import json

    from tests import test_graph

    graphs = [test_graph.desk.graph(), 'flowchart TD\n    a{{"x" --> b']  # the second must fail to parse
    graphs += [g.graph() for g in _every_kind_of_graph()]
    page = tmp_path / "mermaid.html"
    page.write_text(
        "<!DOCTYPE html><div id=out></div>"
        f"<script src='{Path(script).resolve().as_uri()}'></script><script>"
        "mermaid.initialize({startOnLoad:false});"
        f"const graphs = {json.dumps(graphs)};"
        "(async () => { const out = document.getElementById('out');"
        " for (let i = 0; i < graphs.length; i++) {"
        "  try { await mermaid.render('g' + i, graphs[i]); out.insertAdjacentHTML('beforeend', '<i>ok' + i + '</i>'); }"
        "  catch (e) { out.insertAdjacentHTML('beforeend', '<i>err' + i + '</i>'); } } })();</script>"
    )
    proc = run_chromium(
        tmp_path, page.as_uri(), "--allow-file-access-from-files", "--virtual-time-budget=20000", "--dump-dom"
    )
    expected = "<i>ok0</i><i>err1</i>" + "".join(f"<i>ok{i}</i>" for i in range(2, len(graphs)))
    assert expected in proc.stdout, proc.stdout[-500:]


def _every_kind_of_graph() -> list[Any]:
    from jeeves_router import Agent, HandoffRouter, RouterRoute
    from jeeves_router.architectures.capabilities import Capabilities, Capability, CapabilityCall
    from tests.test_graph import _m

    technical = Agent("Tech.", name="technical", model=_m("t"), handoffs=["triage"])
    billing = Agent("Billing.", name="billing", model=_m("b"))
    triage = Agent("Triage.", name="triage", model=_m("x"), handoffs=[billing, technical, "nobody"])
    shared = Agent("Shared.", name="shared", model=_m("s"))
    front = Agent(
        "Front",
        name="front",
        model=_m("f"),
        architecture=HandoffRouter(routes=[RouterRoute("one", shared), RouterRoute("two", shared)]),
    )

    async def fetch(call: CapabilityCall) -> str:
        return "x"

    writer = Agent("Write.", name="writer", model=_m("w"))
    analyst = Agent(
        "A",
        name="analyst",
        model=_m("o"),
        architecture=Capabilities(
            [
                Capability("fetch", fetch, "get", provides=("invoices",), always_active=True),
                Capability("report", writer, "w", requires=("invoices",), provides=("report",)),
            ]
        ),
    )
    odd = Agent("x", name="root", model=_m('we"ird<>&'), handoffs=[Agent("y", name="end", model=_m("1"))])
    return [triage, front, analyst, odd]
