"""Seams: a provider's chunk stream that breaks mid-way, under a Router's recovery ladder, journaled.

Over the OpenAI and Anthropic adapters on the loopback server. Broken before any text, the
adapter retries it itself (the ladder sees no failure): the text comes once, from the second
attempt, and both requests count once each — the Anthropic one with the prompt tokens its
broken stream had reported. Broken after text reached the consumer, nothing is retried (a
retry would repeat the text): the text read stays read once, the specialist's run fails with
one ``run.failed``, the ladder reports, and its request counts once. In both the stream's
``spent``, the result's usage and the journal's ``run.completed`` say the same.

Held when written (no fix needed); the adapters' own tests cover the adapter alone, and
``test_usage_failed_requests`` a tool loop's usage.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jeeves_router import Agent, Router, RouterRoute
from jeeves_router.events import Event, TextDelta
from jeeves_router.journal import JournalRuntime, SQLiteJournal
from jeeves_router.models.anthropic import AnthropicModel
from jeeves_router.models.openai import OpenAIModel
from jeeves_router.policies import RetryPolicy
from jeeves_router.recovery import Recovery
from jeeves_router.testing import RecordedSleeps, StaticClassifier
from tests.loopback import LoopbackServer, loopback  # noqa: F401  (fixture)
from tests.loopback import Reply as WireReply
from tests.stream_desks import nothing_left_behind

pytest.importorskip("openai")
pytest.importorskip("anthropic")

FIRST_TEXT = {"openai": 1, "anthropic": 3}  # stream events before the first text (role; message and block starts, ping)
# (texts read, requests sent, input tokens counted, run status)
OUTCOMES = {
    ("openai", "before text"): (["Refund ", "issued."], 2, 12, "ok"),
    ("anthropic", "before text"): (["Refund ", "issued."], 2, 24, "ok"),  # the broken one had reported its prompt
    ("openai", "after text"): (["Refund ", "iss"], 1, 0, "critical"),
    ("anthropic", "after text"): (["Refund ", "iss"], 1, 12, "critical"),
}


def desk(server: LoopbackServer, provider: str, journal: SQLiteJournal) -> Agent:
    retry = {"retry": RetryPolicy(max_attempts=2, initial_delay_s=0.5, jitter=0.0), "sleep": RecordedSleeps()}
    if provider == "openai":
        model: OpenAIModel | AnthropicModel = OpenAIModel("gpt-4.1-mini", client=server.openai_client(), **retry)
    else:
        model = AnthropicModel("claude-haiku-4-5", client=server.anthropic_client(), **retry)
    billing = Agent("Billing.", name="billing", model=model)
    recovery = Recovery(sleep=RecordedSleeps())
    router = Router([RouterRoute("billing", billing)], classifier=StaticClassifier("billing"), recovery=recovery)
    return Agent("Desk", name="desk", architecture=router, runtime=JournalRuntime(journal))


@pytest.mark.anyio
@pytest.mark.parametrize("when", ["before text", "after text"])
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_a_chunk_stream_broken_mid_way_repeats_no_text_and_counts_each_request_once(
    loopback: LoopbackServer,  # noqa: F811
    tmp_path: Path,
    provider: str,
    when: str,
) -> None:
    texts, requests, input_tokens, status = OUTCOMES[provider, when]
    cut = FIRST_TEXT[provider] + (0 if when == "before text" else 2)
    broken = WireReply(text=["Refund ", "iss", "ued."], disconnect_after=cut)
    loopback.script(broken, WireReply(text=["Refund ", "issued."]))
    journal = SQLiteJournal(tmp_path / "j.db")
    with nothing_left_behind() as problems:
        stream = desk(loopback, provider, journal).stream("refund INV-7", session_id="s")
        events: list[Event] = [ev async for ev in stream]
        await loopback.aclose_clients()
    assert problems == []
    assert [ev.text for ev in events if isinstance(ev, TextDelta)] == texts  # each once, none repeated
    kinds = [ev.kind for ev in events]
    assert "recovery.retry" not in kinds and len(loopback.requests) == requests
    assert kinds.count("run.failed") == (when == "after text")  # the specialist's, once
    assert kinds.count("recovery.report") == (when == "after text") and kinds[-1] == "run.completed"
    result = stream.result
    assert result is not None and result.status == status
    assert (stream.spent.requests, stream.spent.input_tokens) == (requests, input_tokens)
    assert result.usage == stream.spent and result.usage.cost_usd is None  # a broken request's cost is unknown
    [completed] = [
        e.record.event
        for e in await journal.read("s", types=("event",))
        if e.record.event["kind"] == "run.completed" and e.record.event["path"] == ["desk"]  # type: ignore[union-attr]
    ]
    assert completed["result"]["usage"]["requests"] == requests
    assert completed["result"]["usage"]["input_tokens"] == input_tokens
