"""Project-wide test configuration: real model calls are blocked for every test."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ["JEEVES_BLOCK_REAL_MODELS"] = "1"
for _key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
    os.environ.pop(_key, None)

from hypothesis import settings  # noqa: E402

from jeeves_router.journal.sqlite import SQLiteJournal  # noqa: E402
from jeeves_router.settings import block_real_model_calls  # noqa: E402
from tests.recovery_clock import Clock  # noqa: E402

block_real_model_calls(True)

# Hypothesis fails an example that takes over 200 ms (its default deadline), and again if it is
# quicker when replayed ("Unreliable test timings"): a timed assertion a loaded machine fails.
settings.register_profile("jeeves", deadline=None)
settings.load_profile("jeeves")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _restore_library_log_level() -> Iterator[None]:
    """The CLI sets the library logger's level for its process; keep it out of the next test."""
    logger = logging.getLogger("jeeves_router")
    level, handlers = logger.level, list(logger.handlers)
    yield
    logger.setLevel(level)
    logger.handlers[:] = handlers


_TESTS = str(Path(__file__).parent)


@pytest.fixture(autouse=True)
def _close_the_tests_sqlite_journals(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Close the connection of every SQLiteJournal a test module made and left open.

    Python 3.13 warns (ResourceWarning, a failure under pytest) for each ``sqlite3.Connection``
    collected unclosed, in whichever later test the collection happens. Only journals built by
    code under ``tests/`` are closed here: one the library makes itself (serve, the CLI) must
    close its own connection, and its leak still fails the test that collects it.
    """
    made: list[SQLiteJournal] = []
    init = SQLiteJournal.__init__

    def tracked(self: SQLiteJournal, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        if sys._getframe(1).f_code.co_filename.startswith(_TESTS):
            made.append(self)

    monkeypatch.setattr(SQLiteJournal, "__init__", tracked)
    yield
    for journal in made:
        journal.close()


@pytest.fixture
def dbos_app(tmp_path: Path) -> Iterator[str]:
    """A DBOS system database in the test's own SQLite file (skipped where this Python's SQLite cannot hold one)."""
    from dbos import DBOS

    from jeeves_router.durable.dbos import _sqlite_timestamps_work

    if not _sqlite_timestamps_work():
        pytest.skip("DBOS cannot write a SQLite system database with this Python's SQLite")
    yield f"sqlite:///{tmp_path / 'dbos.sqlite'}"
    DBOS.destroy(destroy_registry=True)


@pytest.fixture(scope="module")
def pg_url() -> str:
    """The PostgreSQL server of the postgres-marked tests: skipped without one, failed in CI."""
    url = os.environ.get("JEEVES_PG_URL")
    if not url:
        hint = 'set JEEVES_PG_URL (e.g. eval "$(scripts/postgres.sh)") to run the PostgreSQL tests'
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI must run the PostgreSQL tests: {hint}")
        pytest.skip(f"no PostgreSQL server: {hint}")
    return url


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """The recovery ladder's clock, under the test's control (see :class:`tests.recovery_clock.Clock`)."""
    c = Clock()
    monkeypatch.setattr("jeeves_router.recovery.run.time", c)
    monkeypatch.setattr("jeeves_router.recovery.clock.anyio", c.box_anyio)  # the time box, held with it
    return c


@pytest.fixture
def no_process_left() -> Iterator[None]:
    """Fails the test if a child process it started (an MCP server) outlives it; use with ``usefixtures``."""
    from tests.mcp_helpers import child_pids

    before = child_pids()
    yield
    assert child_pids() - before == set(), "an MCP server process outlived its test"
