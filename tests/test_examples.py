"""The examples run with no API key and print what they promise."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@functools.cache
def run_example(name: str, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    env["PYTHONPATH"] = str(ROOT)
    env["PYTHONWARNINGS"] = "error"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / name), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def test_support_desk() -> None:
    out = run_example("support_desk.py", "I was charged twice")
    assert "[routed to billing with confidence 0.93]" in out
    assert "I have refunded the duplicate 42.00." in out
    assert "status=ok route=billing" in out


@pytest.mark.parametrize("severity", ["RETRIABLE", "RECLASSIFICATION", "REPLANNING", "CRITICAL", "FATAL"])
def test_recovery_shows_each_severity(severity: str) -> None:
    out = run_example("recovery.py")
    assert f"== {severity}" in out


def test_embedded_router_fits_measures_and_routes() -> None:
    out = run_example("embedded_router.py", "my parcel never arrived", "what's the capital of Peru")
    lines = out.splitlines()
    assert lines[0] == "encoder: all-MiniLM-L6-v2-int8-tq8"
    assert lines[1].startswith("fitted: threshold") and lines[2].startswith("test: accuracy")
    assert "'my parcel never arrived' -> shipping" in out
    assert '"what\'s the capital of Peru" -> out of scope' in out
    assert "debug" not in out


def test_embedded_router_help_prints_its_usage_and_routes_nothing() -> None:
    out = run_example("embedded_router.py", "--help")
    assert out.startswith("usage: embedded_router.py [-h] [--mpnet] [REQUEST ...]"), out
    assert "encoder:" not in out and "->" not in out


def test_embedded_router_on_the_larger_encoder() -> None:
    pytest.importorskip("safetensors")
    out = run_example("embedded_router.py", "--mpnet", "my parcel never arrived", "what's the capital of Peru")
    lines = out.splitlines()
    assert lines[0] == "encoder: all-mpnet-base-v2-int8-tq8" and lines[2].startswith("test: accuracy")
    assert "'my parcel never arrived' -> shipping" in out
    assert '"what\'s the capital of Peru" -> out of scope' in out
