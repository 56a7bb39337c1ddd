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
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["GRAPH", "FusionError", "fused_bert"]

#: Names the graph layout in cache file names; change it whenever :func:`fused_bert` changes.
GRAPH = "mha2"

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
    from onnx import TensorProto, helper, numpy_helper

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

    ms = "com.microsoft"
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
        p, x = f"l{layer}_", f"h{layer}"
        nodes += [
            helper.make_node("MatMul", [x, f"{p}qkv"], [f"{p}qkv_out"]),
            helper.make_node("Split", [f"{p}qkv_out"], [f"{p}q", f"{p}k", f"{p}v"], axis=-1),
            helper.make_node(
                "MultiHeadAttention",
                [f"{p}q", f"{p}k", f"{p}v", f"{p}qkv_bias", "key_padding_mask"],
                [f"{p}context"],
                domain=ms,
                num_heads=hidden // head,
                scale=alpha,
            ),
            helper.make_node("MatMul", [f"{p}context", f"{p}out"], [f"{p}attn"]),
            *_residual_norm(helper, f"{p}attn", f"{p}out_bias", x, f"{p}ln1", f"{p}h_attn", eps),
            helper.make_node("MatMul", [f"{p}h_attn", f"{p}up"], [f"{p}up_out"]),
            helper.make_node("BiasGelu", [f"{p}up_out", f"{p}up_bias"], [f"{p}gelu"], domain=ms),
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
    opset = [helper.make_opsetid("", 17), helper.make_opsetid(ms, 1)]
    return helper.make_model(graph, opset_imports=opset, producer_name="jeeves_router")
