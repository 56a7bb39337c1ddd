"""`eval` / `fit --classifier module:attr` close the client the classifier's model built on the command's loop."""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

pytest.importorskip("openai")

from jeeves_router.classify.llm import LLMClassifier
from jeeves_router.cli import app
from jeeves_router.models.openai import OpenAIModel
from tests.loopback import LoopbackServer, RecordedRequest, Reply

TARGET = "tests.test_cli_closes_models"  # the CLI imports this module under this name, pytest under another
#: The models :func:`loopback_classifier` built, and the server they call (set by the test).
BUILT: list[OpenAIModel] = []
SERVER: list[LoopbackServer] = []


def loopback_classifier(routes: list[Any]) -> LLMClassifier:
    model = OpenAIModel("classifier", base_url=SERVER[-1].openai_base_url, api_key="sk-local")
    BUILT.append(model)
    return LLMClassifier(model)


def billing(request: RecordedRequest) -> Reply:
    return Reply(text=json.dumps({"route": "billing", "confidence": 0.9}))


@pytest.fixture
def target() -> Iterator[Any]:
    """This module as the CLI imports it, with the server its classifier calls; emptied after the test."""
    module = importlib.import_module(TARGET)
    with LoopbackServer() as loop:
        loop.responder = billing
        module.SERVER.append(loop)
        try:
            yield module
        finally:
            module.SERVER.clear()
            module.BUILT.clear()


@pytest.mark.parametrize("command", [["eval"], ["fit", "--max-misroute", "0.5"]])
def test_a_command_closes_the_client_its_imported_classifiers_model_built(
    command: list[str], target: Any, tmp_path: Path
) -> None:
    data = tmp_path / "labelled.jsonl"
    data.write_text("".join(json.dumps({"text": f"charged twice {i}", "route": "billing"}) + "\n" for i in range(12)))
    result = CliRunner().invoke(app, [*command, "--data", str(data), "--classifier", f"{TARGET}:loopback_classifier"])
    assert result.exit_code == 0, result.output
    [model] = target.BUILT
    assert len(target.SERVER[0].requests) == 12  # the classifier's model was called, through a client it built
    assert model._client is None  # closed (aclose) before the command's event loop ended
