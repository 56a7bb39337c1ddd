r"""Text with an unpaired UTF-16 surrogate entering the library: it is routed, never a crash.

``json.loads('"\ud83d"')`` (an emoji cut in half by a client that truncates UTF-16) and bytes
read as surrogate escapes (a command line's stdin) give Python strings that UTF-8 cannot
carry. Where text enters (``Agent.run``/``stream``, the embedded classifier, the command
line's readers) each unpaired surrogate becomes U+FFFD and a split pair is joined
(``jeeves_router._text``). The HTTP server refuses such a body with a 400 instead
(``tests/test_seams_serving.py``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

import anyio
import pytest

from jeeves_router import Agent, Router, RouterRoute
from jeeves_router.classify.embedding import EmbeddingClassifier, HashingEncoder
from jeeves_router.classify.embedding.encoders import Vectors
from jeeves_router.classify.types import ClassifyRequest, RouteSpec
from jeeves_router.messages import user
from jeeves_router.testing import FunctionModel

CUT = "I was charged twice \ud83d"  # the low half of the emoji was cut off
FIXED = "I was charged twice \ufffd"
DATA = Path(str(resources.files("jeeves_router") / "data"))

# -- the embedded classifier -----------------------------------------------------------------

ROUTES = [
    RouteSpec("billing", "payments and refunds", ("I was charged twice \ud83d", "refund my order")),
    RouteSpec("shipping", "parcels", ("my parcel has not arrived \udc00", "where is my package")),
]


class Utf8Encoder(HashingEncoder):
    """Refuses what UTF-8 cannot carry, as the tokenizers of the real encoders do."""

    def encode_tokens(self, texts: Sequence[str]) -> tuple[Vectors, list[Vectors]]:
        for text in texts:
            text.encode("utf-8")  # UnicodeEncodeError on an unpaired surrogate
        return super().encode_tokens(texts)


def test_route_texts_negatives_requests_and_fit_rows_reach_the_encoder_as_valid_text() -> None:
    negatives = ["pizza \ud83d recipe", "weather"]
    clf = EmbeddingClassifier(ROUTES, encoder=Utf8Encoder(), negatives=negatives)
    assert clf.classify_text(CUT) == clf.classify_text(FIXED)
    assert clf.classify_text(CUT).classification.route == "billing"
    assert clf.classify_batch([CUT, "\udcff", " "]) == clf.classify_batch([FIXED, "\ufffd", " "])
    report = clf.fit(
        ["charged twice for it \ud83d", "a refund please", "parcel late \udc00", "package lost", "pizza \ud83d"],
        ["billing", "billing", "shipping", "shipping", "oos"],
    )
    assert report.threshold.threshold is not None


@pytest.fixture(scope="module")
def desk() -> EmbeddingClassifier:
    pytest.importorskip("onnxruntime")
    return EmbeddingClassifier.load(DATA / "desk_classifier.json")


def test_the_shipped_desk_routes_a_request_with_a_cut_emoji(desk: EmbeddingClassifier) -> None:
    # the tokenizers library raised TypeError("TextInputSequence must be str")
    fixed = desk.classify_text(FIXED)
    assert fixed.classification.route == "billing"
    assert desk.classify_text(CUT) == fixed
    batch = desk.classify_batch([CUT] * 20 + ["\udcff\udcfe"])  # 16 or more: split between threads
    assert [r.classification.route for r in batch[:20]] == ["billing"] * 20
    assert batch[0].classification == fixed.classification and batch[20] == desk.classify_text("\ufffd\ufffd")

    async def classify() -> None:
        for _ in range(3):  # the first call encodes on the loop; later ones may move to a thread
            result = await desk.classify(ClassifyRequest(CUT, routes=()))
            assert result.classification == fixed.classification

    anyio.run(classify)


# -- Agent.run: an LLM classifier behind the openai client -----------------------------------


@pytest.mark.anyio
async def test_a_router_whose_llm_classifier_is_served_over_http_routes_a_cut_emoji() -> None:
    # httpx failed to encode the request body: UnicodeEncodeError out of Agent.run
    pytest.importorskip("openai")
    from jeeves_router.models.openai import OpenAIModel
    from jeeves_router.serve import create_app
    from tests.serve_apps import running

    served = FunctionModel(lambda r: "route: billing\nconfidence: 0.9", name="llm")
    llm = Agent("Classify.", name="llm", model=served)
    billing = Agent("Billing.", name="billing", model=FunctionModel(lambda r: "refunded"))
    general = Agent("The rest.", name="general", model=FunctionModel(lambda r: "general"))
    routes = [RouterRoute("billing", billing, "payments"), RouterRoute("general", general, "the rest")]
    with running(create_app(llm)) as server:
        async with OpenAIModel("llm", base_url=server.url + "/v1", api_key="unused") as remote:
            desk = Agent(
                "Desk.", name="desk", model=remote, architecture=Router(routes=routes, fallback_route="general")
            )
            result = await desk.run(CUT, history=[user("earlier \udc00 turn")])
            async with desk.stream(CUT) as events:
                kinds = [ev.kind async for ev in events]
    assert (result.status, result.route, result.output) == ("ok", "billing", "refunded")
    assert events.result is not None and events.result.route == "billing" and kinds[-1] == "run.completed"
    assert FIXED in served.requests[0].messages[-1].text


@pytest.mark.anyio
async def test_the_prompt_and_the_history_text_reach_the_model_as_valid_text() -> None:
    model = FunctionModel(lambda r: "ok")
    history = [user("before \ud83d\ude00 after"), user("fine"), user("cut \udc00")]
    await Agent("A.", model=model).run(CUT, history=history)
    assert [m.text for m in model.requests[0].messages] == ["before \U0001f600 after", "fine", "cut \ufffd", FIXED]


# -- the command line --------------------------------------------------------------------------


def test_route_reads_undecodable_stdin_bytes_and_escaped_surrogates_in_jsonl(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    from typer.testing import CliRunner

    from jeeves_router.cli import app

    runner = CliRunner()
    piped = runner.invoke(app, ["route", "-", "--json"], input=b"\xff\xfe\x00bad\nI was charged twice \xf0\x9f\n")
    assert piped.exit_code == 0, piped.output
    rows = [json.loads(line) for line in piped.stdout.splitlines()]
    assert [(r["text"], r["route"]) for r in rows] == [("\ufffd\ufffd\x00bad", None), (FIXED, "billing")]
    data = tmp_path / "requests.jsonl"
    data.write_text('{"text": "I was charged twice \\ud83d"}\n', encoding="utf-8")
    batch = runner.invoke(app, ["route", "--data", str(data), "--json"])
    assert batch.exit_code == 0, batch.output
    assert json.loads(batch.stdout)["text"] == FIXED and json.loads(batch.stdout)["route"] == "billing"


def test_a_route_file_and_validation_rows_with_escaped_surrogates(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    from typer.testing import CliRunner

    from jeeves_router.cli import app
    from jeeves_router.eval import load_labelled, load_negatives, load_routes

    routes = json.loads((DATA / "desk_routes.json").read_text(encoding="utf-8"))
    listed = routes["routes"] if isinstance(routes, dict) else routes
    listed[0]["examples"] = [*listed[0]["examples"], "an example cut \ud83d"]
    file = tmp_path / "routes.json"
    text = json.dumps({"routes": listed, "negatives": ["pizza \ud83d recipe"]})  # as the escape \ud83d
    file.write_text(text, encoding="utf-8")
    assert load_routes(file)[0].examples[-1] == "an example cut \ufffd"
    assert load_negatives(file) == ("pizza \ufffd recipe",)
    rows = tmp_path / "val.jsonl"
    rows.write_text('{"text": "charged twice \\ud83d", "route": "billing"}\n', encoding="utf-8")
    assert load_labelled(rows)[0].text == "charged twice \ufffd"
    routed = CliRunner().invoke(app, ["route", "--routes", str(file), "--json", "I was charged twice"])
    assert routed.exit_code == 0, routed.output
    evaluated = CliRunner().invoke(app, ["eval", "--data", str(rows)])
    assert evaluated.exit_code == 0, evaluated.output
