"""A process that used llama.cpp exits without unclosed-file warnings.

``llama_cpp._utils`` opens two files on ``os.devnull`` at import and never closes them
(abetlen/llama-cpp-python#1828): every pytest worker that loaded the local model printed
``ResourceWarning: unclosed file <... name='/dev/null' ...>`` at exit. The adapter has them
closed at interpreter exit; while the program runs they stay open for llama.cpp to use.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from jeeves_router.models import llamacpp

# find_spec, not importorskip: importing llama_cpp while collecting would leave its files open
# in every worker, which is what this file checks does not happen
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None, reason="needs the 'local' extra (llama-cpp-python)"
)

ROOT = Path(__file__).resolve().parents[1]


def exit_warnings(code: str) -> str:
    """The stderr of ``code`` run with ResourceWarning shown (``-X dev``), which must exit 0."""
    done = subprocess.run(
        [sys.executable, "-X", "dev", "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stderr


def test_importing_llama_cpp_alone_leaves_dev_null_open() -> None:
    # the upstream behaviour the adapter works around; when this fails, the workaround can go
    assert "ResourceWarning: unclosed file" in exit_warnings("import llama_cpp")


def test_a_model_leaves_no_unclosed_file_at_exit() -> None:
    code = "from jeeves_router.models.llamacpp import LlamaCppModel\nLlamaCppModel('/nonexistent/model.gguf')\n"
    assert "ResourceWarning" not in exit_warnings(code)


def test_a_model_over_a_given_llama_leaves_no_unclosed_file_at_exit() -> None:
    code = (
        "import llama_cpp\n"
        "from jeeves_router.models.llamacpp import LlamaCppModel\n"
        "LlamaCppModel('smollm2', llama=object())\n"
    )
    assert "ResourceWarning" not in exit_warnings(code)


def test_the_files_stay_open_while_the_program_runs() -> None:
    llamacpp.LlamaCppModel("/nonexistent/model.gguf")
    llamacpp.LlamaCppModel("/nonexistent/model.gguf")
    utils = sys.modules["llama_cpp._utils"]
    handles = [utils.outnull_file, utils.errnull_file]
    assert not any(f.closed for f in handles)  # llama.cpp silences its loading through them
    assert [id(f) for f in llamacpp._CLOSED_AT_EXIT] == [id(f) for f in handles]  # hooked once
