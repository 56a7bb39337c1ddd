"""The examples build their embedded classifier before the event loop starts, as its docstring says.

Building an ``EmbeddingClassifier`` (and fitting it) encodes texts on the CPU: done inside
``async def main()`` it blocks the event loop for as long (about 0.4 s for the encoder alone).
Each example runs here with ``EmbeddingClassifier.__init__`` and ``fit`` refusing to run on
a running event loop.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

_RUNNER = """
import asyncio, functools, runpy, sys

from jeeves_router.classify.embedding import EmbeddingClassifier


def off_the_loop(method):
    @functools.wraps(method)
    def guarded(*args, **kwargs):
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return method(*args, **kwargs)
        raise SystemExit(f"EmbeddingClassifier.{method.__name__} ran on the event loop")
    return guarded


EmbeddingClassifier.__init__ = off_the_loop(EmbeddingClassifier.__init__)
EmbeddingClassifier.fit = off_the_loop(EmbeddingClassifier.fit)
if sys.argv[1].endswith("offline_desk.py"):  # SmolLM2 replaced by a stand-in: no llama.cpp run here
    import jeeves_router.models.llamacpp as llamacpp
    from jeeves_router.testing import FunctionModel

    answer = "route: technical\\nconfidence: 0.9"
    llamacpp.LlamaCppModel = lambda *args, **kwargs: FunctionModel(lambda request: answer, name="smollm2")
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@pytest.mark.parametrize(
    ("example", "args"),
    [("embedded_router.py", ["I was charged twice"]), ("offline_desk.py", ["The API returns 500"])],
)
def test_the_example_builds_its_embedded_classifier_off_the_event_loop(example: str, args: list[str]) -> None:
    pytest.importorskip("onnxruntime")
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run(
        [sys.executable, "-c", _RUNNER, str(ROOT / "examples" / example), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "status=ok" in proc.stdout or "'I was charged twice' -> billing" in proc.stdout, proc.stdout
