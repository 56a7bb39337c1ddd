"""Project-wide test configuration: real model calls are blocked for every test."""

from __future__ import annotations

import os

import pytest

os.environ["JEEVES_BLOCK_REAL_MODELS"] = "1"
for _key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
    os.environ.pop(_key, None)

from jeeves_router.settings import block_real_model_calls  # noqa: E402

block_real_model_calls(True)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _restore_structlog_config():  # type: ignore[no-untyped-def]
    """The CLI configures structlog for its process; keep one test's configuration out of the next."""
    import structlog

    saved = structlog.get_config()
    yield
    structlog.configure(**saved)
