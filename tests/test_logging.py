"""The library logs through stdlib ``logging``, says nothing unless configured, and never logs a secret."""

from __future__ import annotations

import logging
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from jeeves_router import Agent, Router, RouterRoute
from jeeves_router._log import get_logger, redact
from jeeves_router.models.openai import OpenAIModel
from jeeves_router.policies import RetryPolicy
from jeeves_router.testing import ScriptedModel
from tests.loopback import FAKE_OPENAI_KEY, LoopbackServer, Reply, Status, loopback  # noqa: F401

ROOT = Path(__file__).resolve().parents[1]


def _python(code: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    env["PYTHONPATH"] = str(ROOT)
    env["PYTHONWARNINGS"] = "error"
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120, check=False
    )


def test_import_loads_neither_rich_nor_structlog() -> None:
    proc = _python(
        "import sys, jeeves_router\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'rich', 'structlog', 'typer', 'opentelemetry'}))"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_an_unconfigured_program_prints_nothing_even_for_failures_and_retries() -> None:
    # a retried model failure, a run failure and a capability-style warning: all logged, none printed
    proc = _python(
        "import anyio\n"
        "from jeeves_router import Agent\n"
        "from jeeves_router.testing import ScriptedModel\n"
        "from jeeves_router._log import get_logger\n"
        "get_logger('jeeves_router.x').warning('a warning', detail=1)\n"
        "agent = Agent('x', name='a', model=ScriptedModel([RuntimeError('boom')]))\n"
        "try:\n"
        "    anyio.run(agent.run, 'hi')\n"
        "except RuntimeError:\n"
        "    pass\n"
    )
    assert proc.returncode == 0, proc.stderr
    assert (proc.stdout, proc.stderr) == ("", "")


def test_support_desk_example_prints_only_its_own_output() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")}
    env["PYTHONPATH"] = str(ROOT)
    env["PYTHONWARNINGS"] = "error"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "support_desk.py"), "I was charged twice"],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "[routed to billing with confidence 0.93]",
        "Invoice INV-1001 was paid twice. I have refunded the duplicate 42.00.",
        "[status=ok route=billing usage=45 tokens in 3 requests]",
    ]
    assert proc.stderr == ""


def test_fields_are_rendered_and_kept_and_secrets_masked(caplog: pytest.LogCaptureFixture) -> None:
    log = get_logger("jeeves_router.test")
    with caplog.at_level(logging.DEBUG, logger="jeeves_router"):
        log.info("model.retry", model="openai:x", attempt=2, api_key="hunter2hunter2", error=f"bad {FAKE_OPENAI_KEY}")
        log.debug("plain")
    first, second = caplog.records
    assert first.levelno == logging.INFO and first.name == "jeeves_router.test"
    assert first.getMessage().startswith("model.retry model='openai:x' attempt=2 api_key='***' error='bad sk-lo")
    assert first.fields["attempt"] == 2 and first.fields["api_key"] == "***"  # type: ignore[attr-defined]
    assert first.event == "model.retry"  # type: ignore[attr-defined]
    assert FAKE_OPENAI_KEY not in first.getMessage() and "hunter2" not in first.getMessage()
    assert second.getMessage() == "plain"
    assert first.filename == Path(__file__).name  # the caller's line, not the wrapper's


def test_nothing_is_formatted_when_the_level_is_off(caplog: pytest.LogCaptureFixture) -> None:
    class Exploding:
        def __repr__(self) -> str:
            raise AssertionError("formatted although DEBUG is off")

    with caplog.at_level(logging.INFO, logger="jeeves_router"):
        get_logger("jeeves_router.test").debug("skipped", value=Exploding())
    assert caplog.records == []


def test_redact_masks_keys_and_bearer_tokens() -> None:
    out = redact(f"key {FAKE_OPENAI_KEY}; Authorization: Bearer abc.def-123", ["abc"])
    assert FAKE_OPENAI_KEY[8:] not in out and "def-123" not in out


async def _no_wait(_: float) -> None:
    return None


def loopback_billing_desk(loopback: LoopbackServer, api_key: str | None = None) -> Agent:  # noqa: F811
    """A desk routed to billing, whose specialist is the real OpenAI adapter on ``loopback`` (2 attempts, no wait)."""
    client = loopback.openai_client() if api_key is None else loopback.openai_client(api_key=api_key)
    retry = RetryPolicy(max_attempts=2, initial_delay_s=0.01, jitter=0.0)
    model = OpenAIModel("gpt-4.1-mini", client=client, retry=retry, sleep=_no_wait, rng=random.Random(0))
    billing = Agent("You handle billing.", name="billing", model=model)
    classifier = ScriptedModel(["route: billing\nconfidence: 0.9"], name="clf")
    router = Router([RouterRoute("billing", billing, "billing")])
    return Agent("desk", name="desk", model=classifier, architecture=router)


@pytest.mark.anyio
async def test_a_routed_run_through_the_real_openai_client_logs_no_key(
    loopback: LoopbackServer,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    echo = f"Incorrect API key provided: {FAKE_OPENAI_KEY}."
    loopback.script(Status(503, message=echo), Reply(text="Refund issued."))
    desk = loopback_billing_desk(loopback)
    with caplog.at_level(logging.DEBUG):  # every logger: ours, openai's, httpx's
        result = await desk.run("charged twice", session_id="s-log")
    assert result.output == "Refund issued."
    assert loopback.requests[0].headers["authorization"] == f"Bearer {FAKE_OPENAI_KEY}"  # it was sent
    ours = [r for r in caplog.records if r.name.startswith("jeeves_router")]
    assert any(getattr(r, "event", "") == "model.retry" for r in ours)
    assert any(r.name.startswith(("openai", "httpx", "httpcore")) for r in caplog.records)  # theirs were captured too
    for r in caplog.records:
        text = f"{r.getMessage()} {r.args!r} {getattr(r, 'fields', '')!r} {r.exc_text or ''}"
        assert FAKE_OPENAI_KEY[8:20] not in text, r.name


def test_cli_verbose_shows_debug_lines_on_stderr_only(capsys: pytest.CaptureFixture[str]) -> None:
    from jeeves_router.cli import app

    quiet = CliRunner().invoke(app, ["route", "I was charged twice"])
    assert quiet.exit_code == 0, quiet.output
    assert logging.getLogger("jeeves_router").getEffectiveLevel() == logging.WARNING
    loud = CliRunner().invoke(app, ["-v", "route", "I was charged twice"])
    assert loud.exit_code == 0, loud.output
    assert logging.getLogger("jeeves_router").getEffectiveLevel() == logging.DEBUG
    assert quiet.stdout == loud.stdout  # logs never go to stdout
    capsys.readouterr()
    get_logger("jeeves_router.probe").debug("probe", n=1)
    get_logger("jeeves_router.probe").debug("probe", n=2)
    captured = capsys.readouterr()
    assert captured.err.splitlines() == ["DEBUG jeeves_router.probe: probe n=1", "DEBUG jeeves_router.probe: probe n=2"]
    assert captured.out == ""
