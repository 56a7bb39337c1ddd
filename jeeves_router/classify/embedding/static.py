"""Encoders without a transformer at query time: static word vectors and hashed words.

:class:`WordLlamaEncoder` looks word pieces up in a table (very fast, less accurate);
:class:`HashingEncoder` needs no model at all (deterministic, for tests and examples).
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np

from ..._text import valid_texts
from ...errors import UsageError
from .encoders import Vectors, _package_dir, _set_offline, l2_normalise

__all__ = ["WordLlamaEncoder", "HashingEncoder"]


class WordLlamaEncoder:
    """WordLlama ``l2_supercat`` static token embeddings: very fast, less accurate.

    The weights and tokenizer ship inside the ``wordllama`` wheel; they are loaded from the
    package folder with downloads disabled.

    Args:
        dim: Embedding size (64, 128, 256, 512 or 1024).
    """

    dim: int

    def __init__(self, *, dim: int = 256) -> None:
        _set_offline()
        try:
            from wordllama import WordLlama
        except ImportError as exc:
            raise UsageError("WordLlamaEncoder needs `pip install wordllama==0.4.0.post1`") from exc
        self._model = WordLlama.load(cache_dir=_package_dir("wordllama"), dim=dim, disable_download=True)
        self.dim = dim
        self.name = f"wordllama-l2_supercat-{dim}"

    def encode(self, texts: Sequence[str]) -> Vectors:
        """Encode ``texts`` (see :meth:`Encoder.encode`)."""
        if isinstance(texts, str):
            raise UsageError("encode() takes a sequence of texts, not one string; wrap it in a list")
        if not texts:
            return np.empty((0, self.dim), dtype=np.float32)
        # its tokenizer refuses an unpaired surrogate (TypeError): valid_texts repairs it
        return l2_normalise(self._model.embed(valid_texts(texts), norm=True))


class HashingEncoder:
    """A deterministic bag of hashed words and character trigrams (for tests, no model).

    Args:
        dim: Vector size.
    """

    def __init__(self, *, dim: int = 512) -> None:
        if dim < 8:
            raise UsageError("HashingEncoder: dim must be >= 8")
        self.dim = dim
        self.name = f"hashing-{dim}"

    def encode(self, texts: Sequence[str]) -> Vectors:
        """Encode ``texts`` (see :meth:`Encoder.encode`)."""
        return self.encode_tokens(texts)[0]

    def encode_tokens(self, texts: Sequence[str]) -> tuple[Vectors, list[Vectors]]:
        """Sentence vectors and one vector per word (see :meth:`TokenEncoder.encode_tokens`)."""
        if isinstance(texts, str):
            raise UsageError("encode() takes a sequence of texts, not one string; wrap it in a list")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        per_text: list[Vectors] = []
        for row, text in enumerate(texts):
            words = "".join(c if c.isalnum() else " " for c in text.lower()).split()
            word_vectors = np.zeros((max(1, len(words)), self.dim), dtype=np.float32)
            for w, word in enumerate(words):
                word_vectors[w, zlib.crc32(word.encode()) % self.dim] += 1.0
                padded = f"#{word}#"
                for i in range(len(padded) - 2):
                    word_vectors[w, zlib.crc32(padded[i : i + 3].encode()) % self.dim] += 0.5
            out[row] = word_vectors.sum(axis=0)
            per_text.append(l2_normalise(word_vectors) if words else l2_normalise(out[row : row + 1]))
        return l2_normalise(out), per_text
