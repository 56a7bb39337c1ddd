"""examples/handoff_desk.py runs on scripted models and shows routing, a handoff and stickiness."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "handoff_desk.py"


@pytest.mark.anyio
async def test_handoff_desk_example(capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("handoff_desk_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    await module.main()
    out = capsys.readouterr().out
    assert "[desk -> billing: duplicate charge]" in out
    assert "[billing -> technical: HTTP 500 on invoice download]" in out
    assert "[desk -> technical: sticky session]" in out
    assert out.count("status=ok") == 3
