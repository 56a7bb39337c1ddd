"""Seams on top of the engine: tracing, the trace page and the CLI meeting failures, secrets and replays.

* A provider error that quotes the API key (a sentinel that is not key-shaped, as a
  self-hosted server's key may be): no span attribute, span event or span status of the
  failed attempt or of the failed run carries it.
"""

from __future__ import annotations

import json
import random

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from jeeves_router import Agent, Router, RouterRoute
from jeeves_router.errors import ModelError
from jeeves_router.models.openai import OpenAIModel
from jeeves_router.policies import RetryPolicy
from jeeves_router.testing import ScriptedModel
from tests.loopback import LoopbackServer, Reply, Status, loopback  # noqa: F401
from tests.test_tracing import by_name, spans  # noqa: F401  (fixture)

#: A self-hosted server's key: nothing about its shape says "secret".
SENTINEL_KEY = "vllm-5ENTINEL-0123456789abcdef"


def span_text(exporter: InMemorySpanExporter) -> str:
    """Everything a span exporter would send: attributes, events with their attributes, statuses."""
    out = []
    for s in exporter.get_finished_spans():
        events = [(e.name, dict(e.attributes or {})) for e in s.events]
        out.append(json.dumps([s.name, dict(s.attributes or {}), events, s.status.description], default=str))
    return "\n".join(out)


@pytest.mark.anyio
async def test_spans_of_a_failed_provider_call_never_carry_the_api_key(
    spans: InMemorySpanExporter,  # noqa: F811
    loopback: LoopbackServer,  # noqa: F811
) -> None:
    echo = f"Incorrect API key provided: {SENTINEL_KEY}."
    loopback.script(Status(503, message=echo), Status(401, message=echo))

    async def no_wait(_: float) -> None:
        return None

    model = OpenAIModel(
        "gpt-4.1-mini",
        client=loopback.openai_client(api_key=SENTINEL_KEY),
        retry=RetryPolicy(max_attempts=2, initial_delay_s=0.01, jitter=0.0),
        sleep=no_wait,
        rng=random.Random(0),
    )
    billing = Agent("Billing.", name="billing", model=model)
    desk = Agent(
        "desk",
        name="desk",
        model=ScriptedModel(["route: billing\nconfidence: 0.9"], name="clf"),
        architecture=Router([RouterRoute("billing", billing, "payments")]),
    )
    with pytest.raises(ModelError) as info:
        await desk.run("charged twice", session_id="k-1")
    assert loopback.requests[0].headers["authorization"] == f"Bearer {SENTINEL_KEY}"  # it was sent
    assert SENTINEL_KEY not in str(info.value)  # the adapter's error masks it ...
    failed, refused = by_name(spans, "chat gpt-4.1-mini")
    assert [s.attributes["error.type"] for s in (failed, refused)] == ["503", "401"]  # type: ignore[index]
    assert [e.name for e in refused.events] == ["exception"]  # the failure is still recorded ...
    text = span_text(spans)
    assert "HTTP 401" in text
    assert SENTINEL_KEY not in text and SENTINEL_KEY[5:17] not in text  # ... but never the key
