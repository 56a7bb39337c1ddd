#!/usr/bin/env bash
# Install the project with its test extras and run the test suite, lint and type checks.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install -q -e ".[dev]"
python -m ruff check jeeves_router tests examples bench
python -m mypy
python -m pytest -q -p no:cacheprovider
