"""Model port and adapters."""

from .base import Model, ModelRequest, ModelResponse, ModelStreamItem, ModelTextDelta, ResponseFormat, ToolSpec
from .registry import check_model, register_provider, resolve_model

__all__ = [
    "Model",
    "ModelRequest",
    "ModelResponse",
    "ModelStreamItem",
    "ModelTextDelta",
    "ResponseFormat",
    "ToolSpec",
    "check_model",
    "register_provider",
    "resolve_model",
]
