"""Where the new usage mechanisms meet the old ones: an agent as a tool, a failed run's spend, the server.

Each test drives a combination a user meets: an agent used as a tool under the caller's
time limit, inside a router that fails, in a stream closed early; a failed run streamed
over the OpenAI wire with ``stream_options.include_usage``.
"""

from __future__ import annotations

import openai
import pytest

from jeeves_router.serve import create_app
from jeeves_router.testing import DEFAULT_USAGE, Chunks, FunctionModel, Reply
from jeeves_router.usage import Usage
from tests.serve_apps import desk_with, running

SPECIALIST = Usage(input_tokens=50, output_tokens=3, requests=1)  # what the provider reported before the drop


def _drops_mid_answer(request: object) -> Reply:
    return Reply(Chunks("Refund ", "iss"), usage=SPECIALIST, error=ConnectionResetError("connection reset"))


def test_a_streamed_chat_run_that_fails_mid_answer_still_sends_the_usage_it_asked_for() -> None:
    with running(create_app(desk_with(FunctionModel(_drops_mid_answer)))) as server:
        client = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)
        chunks = []
        with pytest.raises(openai.APIError) as info:
            for piece in client.chat.completions.create(
                model="desk",
                messages=[{"role": "user", "content": "refund"}],
                stream=True,
                stream_options={"include_usage": True},
            ):
                chunks.append(piece)
    assert "run failed (ConnectionResetError)" in str(info.value)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Refund iss"
    usage = [c.usage for c in chunks if c.usage is not None]
    assert len(usage) == 1 and chunks[-1].choices == []  # the usage chunk, last before the error, as a completed run's
    # the classifier's request (DEFAULT_USAGE) and the specialist's dropped one: the run's spent_usage
    spent = DEFAULT_USAGE + SPECIALIST
    assert (usage[0].prompt_tokens, usage[0].completion_tokens) == (spent.input_tokens, spent.output_tokens)
