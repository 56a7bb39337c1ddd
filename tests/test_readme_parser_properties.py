"""The README's property tests of the parser run as they are written.

The README told a user to property-test the parser "as we do in tests/..." — files an
installed package does not have — and showed no code. Its snippet is run here: each
``test_*`` function it defines is called (Hypothesis runs its examples).
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_readme_shows_property_tests_of_the_parser_that_pass(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    snippets = [b for b in blocks if "from hypothesis import" in b and "parse_classification" in b]
    assert len(snippets) == 1, "the README has one property-test example of the parser"
    source = tmp_path / "test_readme_snippet.py"  # a file, as in a user's suite (Hypothesis reads the source)
    source.write_text(snippets[0], encoding="utf-8")
    spec = importlib.util.spec_from_file_location("test_readme_snippet", source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tests = [f for name, f in vars(module).items() if name.startswith("test_") and callable(f)]
    assert len(tests) >= 2
    for test in tests:
        test()
