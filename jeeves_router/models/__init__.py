"""Model port and adapters.

The adapters (``OpenAIModel``, ``AnthropicModel``, ``LlamaCppModel``) are imported on first use,
so importing this package loads no provider module.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports
from .base import Model, ModelRequest, ModelResponse, ModelStreamItem, ModelTextDelta, ResponseFormat, ToolSpec
from .registry import check_model, register_provider, resolve_model

if TYPE_CHECKING:
    from .anthropic import AnthropicModel
    from .llamacpp import LlamaCppModel
    from .openai import OpenAIModel

__all__ = [
    "AnthropicModel",
    "LlamaCppModel",
    "Model",
    "ModelRequest",
    "ModelResponse",
    "ModelStreamItem",
    "ModelTextDelta",
    "OpenAIModel",
    "ResponseFormat",
    "ToolSpec",
    "check_model",
    "register_provider",
    "resolve_model",
]

__getattr__, __dir__ = lazy_exports(
    __name__, {".openai": ("OpenAIModel",), ".anthropic": ("AnthropicModel",), ".llamacpp": ("LlamaCppModel",)}
)
