"""Both SDK adapters obey the server's ``x-should-retry`` header, as the SDKs (whose retries are off) would.

``false`` makes a 5xx ``critical`` (a jeeves-router server sends it about a run that started:
running it again could repeat its side effects); ``true`` makes a 400 retriable.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from jeeves_router.errors import ModelError
from jeeves_router.messages import user
from jeeves_router.models.anthropic import AnthropicModel
from jeeves_router.models.base import ModelRequest
from jeeves_router.models.openai import OpenAIModel
from jeeves_router.policies import RetryPolicy
from tests.loopback import LoopbackServer, Reply, Status, loopback  # noqa: F401  (fixture)

POLICY = RetryPolicy(max_attempts=3, initial_delay_s=0.5, multiplier=2.0, max_delay_s=5.0, jitter=0.0)
HELLO = ModelRequest((user("hi"),), system="You are terse.")


def build(provider: str, server: LoopbackServer, delays: list[float]) -> Any:
    async def sleep(delay: float) -> None:
        delays.append(delay)

    if provider == "openai":
        return OpenAIModel("m", client=server.openai_client(), retry=POLICY, sleep=sleep, rng=random.Random(0))
    return AnthropicModel("m", client=server.anthropic_client(), retry=POLICY, sleep=sleep, rng=random.Random(0))


@pytest.mark.anyio
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_the_servers_x_should_retry_overrides_the_status_rule(loopback: LoopbackServer, provider: str) -> None:  # noqa: F811
    delays: list[float] = []
    loopback.script(Status(500, headers={"x-should-retry": "false"}))  # a retry would find no reply scripted
    with pytest.raises(ModelError) as info:
        await build(provider, loopback, delays).request(HELLO)
    assert len(loopback.requests) == 1 and delays == []
    assert (info.value.severity, info.value.status_code) == ("critical", 500)
    loopback.script(Status(400, headers={"x-should-retry": "True "}), Reply(text="ok"))
    assert (await build(provider, loopback, delays).request(HELLO)).text == "ok"
    assert len(loopback.requests) == 3 and delays == [0.5]


@pytest.mark.anyio
async def test_an_unknown_x_should_retry_value_leaves_the_status_rule(loopback: LoopbackServer) -> None:  # noqa: F811
    delays: list[float] = []
    loopback.script(Status(500, headers={"x-should-retry": "maybe"}), Reply(text="ok"))  # 5xx: retriable
    assert (await build("openai", loopback, delays).request(HELLO)).text == "ok"
    assert len(loopback.requests) == 2 and delays == [0.5]
