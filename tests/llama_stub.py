"""A stand-in for ``llama_cpp.Llama`` (not a test module): enough of it for ``LlamaCppModel``, no weights."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

GUARD_S = 60.0  # a held generation waits at most this long: a test that forgets to release it fails, never hangs


class StubLlama:
    """Enough of ``llama_cpp.Llama`` for the adapter; a generation may be held at its start by ``gate``."""

    def __init__(self, gate: threading.Event | None = None) -> None:
        self.gate = gate
        self.generating = threading.Event()  # a generation has started
        self.active = 0
        self.overlapped = False  # two generations ran at once
        self.prompts: list[list[int]] = []  # the prompt of each generation, as tokens

    def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
        return list(text)  # a token a byte

    def create_completion(self, **kwargs: Any) -> Iterator[dict[str, Any]]:
        self.prompts.append(kwargs["prompt"])

        def chunks() -> Iterator[dict[str, Any]]:
            self.active += 1
            self.overlapped = self.overlapped or self.active > 1
            self.generating.set()
            try:
                if self.gate is not None:
                    self.gate.wait(GUARD_S)
                for piece in ("hello", " world"):
                    yield {"choices": [{"text": piece, "finish_reason": None}]}
                yield {"choices": [{"text": "", "finish_reason": "stop"}]}
            finally:
                self.active -= 1

        return chunks()
