"""Rebuild a BERT encoder's float ONNX graph with onnxruntime's fused attention.

The all-MiniLM-L6-v2 file is a torch-dynamo export: each layer's attention is spelled out as
about twenty Reshape, Transpose, Slice, Concat, Where and MatMul nodes that onnxruntime's
BERT fusion does not recognise, and on one short query those small nodes cost as much as the
weight products. :func:`fused_bert` reads the weights out of that graph (after onnxruntime's
constant folding) and writes the same network with one ``com.microsoft.MultiHeadAttention``
per layer, the query, key and value products packed into one ``[hidden, 3 * hidden]`` product,
``BiasGelu`` for the feed-forward activation, and plain ``Add`` and ``LayerNormalization`` nodes
for the residuals: onnxruntime's fused ``SkipLayerNormalization`` does the same arithmetic but
took about 15 µs per call on a short query against about 2.5 µs for the three plain nodes
(onnxruntime 1.32, one thread), a tenth of the whole encoder.

The arithmetic is the same up to float rounding: the same weights (quantized afterwards by the
same ``quantize_dynamic`` call, so the int8 values and scales are unchanged), the same mask
semantics (padding keys get no attention weight) and the same ``1 / sqrt(head size)`` scale.
The rebuilt graph takes ``input_ids`` and ``attention_mask`` (no ``token_type_ids``: the
segment embedding of segment 0 is added to every token, as the encoder always passed zeros)
and returns ``last_hidden_state``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "DISABLED_OPTIMIZERS",
    "GRAPH",
    "MPNET_GRAPH",
    "SUPERSEDED_LAYOUTS",
    "FusionError",
    "fused_bert",
    "mpnet_graph",
    "relative_buckets",
]

_MS = "com.microsoft"

#: The ONNX IR version of the graphs built here: the one opset 17 needs (onnxruntime >= 1.14 reads it).
_IR_VERSION = 8

#: Names the graph layout in cache file names; change it whenever :func:`fused_bert` changes or
#: the quantizer saves another graph (``mha3``: saved after onnxruntime's extended optimisations).
GRAPH = "mha3"

#: Names :func:`mpnet_graph`'s layout in cache file names; change it whenever that function changes
#: or the quantizer saves another graph (``mpnet2``: as for :data:`GRAPH`).
MPNET_GRAPH = "mpnet2"

#: Earlier layouts each layout replaces: a build, new or found in the cache, removes the cache file of
#: the same source and onnxruntime version in an earlier layout (22 MB for MiniLM, 120 MB for MPNet),
#: which nothing reads.
SUPERSEDED_LAYOUTS = {GRAPH: ("mha1", "mha2"), MPNET_GRAPH: ("mpnet1",)}

#: onnxruntime optimisers every session of these graphs runs without, when the quantizer saves
#: the optimised graph and when an encoder loads it. ``SkipLayerNormFusion``'s fused kernel is
#: several times slower than the plain nodes on short texts.
DISABLED_OPTIMIZERS = ("SkipLayerNormFusion",)

_LINEAR = re.compile(
    r"^(?P<prefix>.*)encoder\.layer\.(?P<layer>\d+)\."
    r"(?P<role>attention\.self\.query|attention\.self\.key|attention\.self\.value|"
    r"attention\.output\.dense|intermediate\.dense|output\.dense)\.bias$"
)


class FusionError(ValueError):
    """The graph is not the BERT layout :func:`fused_bert` knows; the caller keeps it as it is."""


def _weights(model: Any) -> tuple[str, dict[str, NDArray[Any]], dict[tuple[int, str], NDArray[Any]], float, float]:
    """The prefix, named initializers, per-layer weight matrices, head scale and epsilon."""
    from onnx import numpy_helper

    graph = model.graph
    init = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    produced = {out: node for node in graph.node for out in node.output}
    matrices: dict[tuple[int, str], NDArray[Any]] = {}
    prefix = None
    for node in graph.node:
        if node.op_type == "Add":
            bias = next((i for i in node.input if _LINEAR.match(i)), None)
            product = next((produced.get(i) for i in node.input if i != bias), None)
        elif node.op_type == "SkipLayerNormalization" and len(node.input) > 4:
            bias, product = node.input[4], produced.get(node.input[0])
        else:
            continue
        match = _LINEAR.match(bias or "")
        if match is None or product is None or product.op_type != "MatMul" or product.input[1] not in init:
            continue
        prefix = match["prefix"]
        matrices[(int(match["layer"]), match["role"])] = init[product.input[1]]
    scales = [
        a.f for n in graph.node if n.op_type == "FusedMatMul" for a in n.attribute if a.name == "alpha"
    ]  # fmt: skip
    eps = [a.f for n in graph.node if "LayerNormalization" in n.op_type for a in n.attribute if a.name == "epsilon"]
    if prefix is None or not scales or not eps:
        raise FusionError("no BERT layers with named biases, a scaled attention product and layer norms found")
    return prefix, init, matrices, scales[0], eps[0]


def _residual_norm(helper: Any, product: str, bias: str, residual: str, norm: str, out: str, eps: float) -> list[Any]:
    """``LayerNorm(product + bias + residual)`` as three plain nodes (see the module docstring)."""
    return [
        helper.make_node("Add", [product, bias], [f"{norm}_biased"]),
        helper.make_node("Add", [f"{norm}_biased", residual], [f"{norm}_sum"]),
        helper.make_node(
            "LayerNormalization", [f"{norm}_sum", f"{norm}_gamma", f"{norm}_beta"], [out], axis=-1, epsilon=eps
        ),
    ]


def fused_bert(model: Any) -> Any:
    """The fused equivalent of a BERT encoder graph (see the module docstring).

    Args:
        model: An ``onnx.ModelProto`` of a BERT encoder after onnxruntime's extended
            optimisations (constants folded, layer norms fused), with the Hugging Face
            parameter names (``...encoder.layer.N.attention.self.query.bias``, ...).

    Returns:
        A new ``onnx.ModelProto`` (float32 weights).

    Raises:
        FusionError: When the graph does not have that layout.
    """
    from onnx import TensorProto, helper

    prefix, init, matrices, alpha, eps = _weights(model)
    layers = 1 + max(layer for layer, _ in matrices)
    roles = ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense",
             "intermediate.dense", "output.dense")  # fmt: skip
    emb = f"{prefix}embeddings."
    try:
        word = init[f"{emb}word_embeddings.weight"]
        hidden = word.shape[1]
        head = round(1.0 / (alpha * alpha))
        if head < 1 or hidden % head:
            raise FusionError(f"head size {head} does not divide hidden size {hidden}")
        for layer in range(layers):
            for role in roles:
                if (layer, role) not in matrices:
                    raise FusionError(f"layer {layer} has no {role} weight")
        weights: dict[str, NDArray[Any]] = {
            "word_embeddings": word,
            "position_embeddings": init[f"{emb}position_embeddings.weight"],
            "token_type_embeddings": init[f"{emb}token_type_embeddings.weight"],
            "segment": np.zeros((1,), dtype=np.int64),
            "emb_gamma": init[f"{emb}LayerNorm.weight"],
            "emb_beta": init[f"{emb}LayerNorm.bias"],
            "position_ids": np.arange(len(init[f"{emb}position_embeddings.weight"]), dtype=np.int64),
            "zero": np.zeros((1,), dtype=np.int64),
        }
        for layer in range(layers):
            at, p = f"{prefix}encoder.layer.{layer}.", f"l{layer}_"
            q, k, v = (f"{at}attention.self.{x}" for x in ("query", "key", "value"))
            weights[f"{p}qkv"] = np.concatenate([matrices[(layer, r)] for r in roles[:3]], axis=1)
            weights[f"{p}qkv_bias"] = np.concatenate([init[f"{x}.bias"] for x in (q, k, v)])
            weights[f"{p}out"] = matrices[(layer, "attention.output.dense")]
            weights[f"{p}out_bias"] = init[f"{at}attention.output.dense.bias"]
            weights[f"{p}ln1_gamma"] = init[f"{at}attention.output.LayerNorm.weight"]
            weights[f"{p}ln1_beta"] = init[f"{at}attention.output.LayerNorm.bias"]
            weights[f"{p}up"] = matrices[(layer, "intermediate.dense")]
            weights[f"{p}up_bias"] = init[f"{at}intermediate.dense.bias"]
            weights[f"{p}down"] = matrices[(layer, "output.dense")]
            weights[f"{p}down_bias"] = init[f"{at}output.dense.bias"]
            weights[f"{p}ln2_gamma"] = init[f"{at}output.LayerNorm.weight"]
            weights[f"{p}ln2_beta"] = init[f"{at}output.LayerNorm.bias"]
    except KeyError as exc:
        raise FusionError(f"missing parameter {exc}") from exc

    nodes = [
        helper.make_node("Shape", ["input_ids"], ["seq_len_1d"], start=1, end=2),
        helper.make_node("Slice", ["position_ids", "zero", "seq_len_1d"], ["positions"]),
        helper.make_node("Gather", ["word_embeddings", "input_ids"], ["emb_word"]),
        helper.make_node("Gather", ["token_type_embeddings", "segment"], ["emb_segment"]),
        helper.make_node("Gather", ["position_embeddings", "positions"], ["emb_position"]),
        # Same order of additions as the exported graph: (word + segment) + position.
        helper.make_node("Add", ["emb_word", "emb_segment"], ["emb_ws"]),
        helper.make_node("Add", ["emb_ws", "emb_position"], ["emb_sum"]),
        helper.make_node("LayerNormalization", ["emb_sum", "emb_gamma", "emb_beta"], ["h0"], axis=-1, epsilon=eps),
        helper.make_node("Cast", ["attention_mask"], ["key_padding_mask"], to=TensorProto.INT32),
    ]
    for layer in range(layers):
        nodes += _layer(helper, layer, layers, hidden // head, alpha, eps)
    return _model(helper, nodes, weights, hidden)


def relative_buckets(length: int, buckets: int = 32, max_distance: int = 128) -> NDArray[np.int64]:
    """MPNet's relative-position bucket of every (query, key) pair of a ``length``-token text.

    Half of the buckets are for keys before the query, half for keys after it; within each
    half, distances under a quarter of ``buckets`` get a bucket each and longer ones share
    logarithmically wider buckets up to ``max_distance`` (the T5 scheme MPNet uses).
    """
    query = np.arange(length)[:, None]
    distance = query - np.arange(length)[None, :]  # positive: the key comes first
    half = buckets // 2
    out = np.where(distance < 0, half, 0).astype(np.int64)
    distance = np.abs(distance)
    exact = half // 2
    far = exact + np.log(np.maximum(distance, 1) / exact) / np.log(max_distance / exact) * (half - exact)
    out += np.where(distance < exact, distance, np.minimum(far.astype(np.int64), half - 1))
    return out


def mpnet_graph(weights: Mapping[str, NDArray[Any]], *, heads: int, eps: float, max_length: int) -> Any:
    """An MPNet encoder (e.g. all-mpnet-base-v2) as a fused graph, from its named weights.

    The layers are the BERT layers of :func:`fused_bert`; what differs is around them: no
    segment embedding, positions counted from 2 (after the padding index 1), and one learned
    bias per head and relative-position bucket added to every layer's attention scores. That
    bias depends only on the text length, so it is stored once for ``max_length`` tokens and
    sliced per call.

    Args:
        weights: The Hugging Face ``MPNetModel`` parameters by name (``embeddings.*``,
            ``encoder.layer.N.*``, ``encoder.relative_attention_bias.weight``); linear layers
            are ``[out, in]`` as PyTorch stores them.
        heads: Attention heads.
        eps: The layer norms' epsilon.
        max_length: The longest text (in tokens) the graph will be given.

    Returns:
        An ``onnx.ModelProto`` (float32 weights) with the inputs and output of :func:`fused_bert`.

    Raises:
        FusionError: When a parameter is missing or the sizes do not fit together.
    """
    from onnx import TensorProto, helper

    try:
        word = weights["embeddings.word_embeddings.weight"]
        hidden = word.shape[1]
        table = weights["encoder.relative_attention_bias.weight"]  # [buckets, heads]
        layers = 1 + max(int(k.split(".")[2]) for k in weights if k.startswith("encoder.layer."))
        if hidden % heads or table.shape[1] != heads:
            raise FusionError(f"{heads} heads do not fit hidden size {hidden} and a {table.shape} position bias")
        bias = table[relative_buckets(max_length, buckets=table.shape[0])].transpose(2, 0, 1)[None]
        init: dict[str, NDArray[Any]] = {
            "word_embeddings": word,
            "position_embeddings": weights["embeddings.position_embeddings.weight"],
            "emb_gamma": weights["embeddings.LayerNorm.weight"],
            "emb_beta": weights["embeddings.LayerNorm.bias"],
            "position_ids": np.arange(2, 2 + max_length, dtype=np.int64),
            "relative_bias": bias.astype(np.float32),
            "zero": np.zeros((1,), dtype=np.int64),
            "zeros": np.zeros((2,), dtype=np.int64),
            "score_axes": np.array([2, 3], dtype=np.int64),
        }
        for layer in range(layers):
            at, p = f"encoder.layer.{layer}.", f"l{layer}_"
            attn = f"{at}attention.attn."
            init[f"{p}qkv"] = np.concatenate([weights[f"{attn}{r}.weight"].T for r in "qkv"], axis=1)
            init[f"{p}qkv_bias"] = np.concatenate([weights[f"{attn}{r}.bias"] for r in "qkv"])
            init[f"{p}out"], init[f"{p}out_bias"] = weights[f"{attn}o.weight"].T, weights[f"{attn}o.bias"]
            init[f"{p}ln1_gamma"] = weights[f"{at}attention.LayerNorm.weight"]
            init[f"{p}ln1_beta"] = weights[f"{at}attention.LayerNorm.bias"]
            init[f"{p}up"] = weights[f"{at}intermediate.dense.weight"].T
            init[f"{p}up_bias"] = weights[f"{at}intermediate.dense.bias"]
            init[f"{p}down"] = weights[f"{at}output.dense.weight"].T
            init[f"{p}down_bias"] = weights[f"{at}output.dense.bias"]
            init[f"{p}ln2_gamma"] = weights[f"{at}output.LayerNorm.weight"]
            init[f"{p}ln2_beta"] = weights[f"{at}output.LayerNorm.bias"]
    except (KeyError, ValueError, IndexError) as exc:
        raise FusionError(f"not an MPNet parameter set: {exc}") from exc
    nodes = [
        helper.make_node("Shape", ["input_ids"], ["seq_len_1d"], start=1, end=2),
        helper.make_node("Slice", ["position_ids", "zero", "seq_len_1d"], ["positions"]),
        helper.make_node("Concat", ["seq_len_1d", "seq_len_1d"], ["seq_len_2d"], axis=0),
        helper.make_node("Slice", ["relative_bias", "zeros", "seq_len_2d", "score_axes"], ["attention_bias"]),
        helper.make_node("Gather", ["word_embeddings", "input_ids"], ["emb_word"]),
        helper.make_node("Gather", ["position_embeddings", "positions"], ["emb_position"]),
        helper.make_node("Add", ["emb_word", "emb_position"], ["emb_sum"]),
        helper.make_node("LayerNormalization", ["emb_sum", "emb_gamma", "emb_beta"], ["h0"], axis=-1, epsilon=eps),
        helper.make_node("Cast", ["attention_mask"], ["key_padding_mask"], to=TensorProto.INT32),
    ]
    for layer in range(layers):
        nodes += _layer(helper, layer, layers, heads, 1.0 / float(np.sqrt(hidden // heads)), eps, "attention_bias")
    return _model(helper, nodes, init, hidden)


def _layer(helper: Any, layer: int, layers: int, heads: int, alpha: float, eps: float, bias: str = "") -> list[Any]:
    """One post-norm transformer layer: fused attention, then the GELU feed-forward block.

    It reads ``h{layer}`` and the ``l{layer}_*`` weights and writes ``h{layer + 1}`` (the last
    layer writes ``last_hidden_state``); ``bias`` names an attention bias added to the scores.
    """
    p, x = f"l{layer}_", f"h{layer}"
    attention_inputs = [f"{p}q", f"{p}k", f"{p}v", f"{p}qkv_bias", "key_padding_mask"] + ([bias] if bias else [])
    return [
        helper.make_node("MatMul", [x, f"{p}qkv"], [f"{p}qkv_out"]),
        helper.make_node("Split", [f"{p}qkv_out"], [f"{p}q", f"{p}k", f"{p}v"], axis=-1),
        helper.make_node(
            "MultiHeadAttention", attention_inputs, [f"{p}context"], domain=_MS, num_heads=heads, scale=alpha
        ),
        helper.make_node("MatMul", [f"{p}context", f"{p}out"], [f"{p}attn"]),
        *_residual_norm(helper, f"{p}attn", f"{p}out_bias", x, f"{p}ln1", f"{p}h_attn", eps),
        helper.make_node("MatMul", [f"{p}h_attn", f"{p}up"], [f"{p}up_out"]),
        helper.make_node("BiasGelu", [f"{p}up_out", f"{p}up_bias"], [f"{p}gelu"], domain=_MS),
        helper.make_node("MatMul", [f"{p}gelu", f"{p}down"], [f"{p}down_out"]),
        *_residual_norm(
            helper,
            f"{p}down_out",
            f"{p}down_bias",
            f"{p}h_attn",
            f"{p}ln2",
            "last_hidden_state" if layer == layers - 1 else f"h{layer + 1}",
            eps,
        ),
    ]


def _model(helper: Any, nodes: list[Any], weights: dict[str, NDArray[Any]], hidden: int) -> Any:
    """The model of ``nodes`` with ``weights`` as initializers: ids and mask in, hidden states out."""
    from onnx import TensorProto, numpy_helper

    for node in nodes:
        node.name = node.output[0]
    graph = helper.make_graph(
        nodes,
        "fused_bert",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "sequence"]),
        ],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", hidden])],
        initializer=[numpy_helper.from_array(np.ascontiguousarray(v), k) for k, v in weights.items()],
    )
    opset = [helper.make_opsetid("", 17), helper.make_opsetid(_MS, 1)]
    # IR 8 is what opset 17 needs; without it onnx stamps its own newest IR version (14 with onnx
    # 1.23), which onnxruntime 1.23, the last for Python 3.10, refuses to load.
    return helper.make_model(graph, opset_imports=opset, producer_name="jeeves_router", ir_version=_IR_VERSION)
