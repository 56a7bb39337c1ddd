"""Resolve model strings like ``"openai:gpt-4.1-mini"`` to :class:`Model` objects, lazily."""

from __future__ import annotations

import importlib
from collections.abc import Callable

from ..errors import UsageError
from .base import Model

__all__ = ["resolve_model", "register_provider", "ModelLike"]

ModelLike = "Model | str"

# provider prefix -> (module, factory attribute, pip extra)
_PROVIDERS: dict[str, tuple[str, str, str]] = {
    "openai": ("jeeves_router.models.openai", "OpenAIModel", "openai"),
    "anthropic": ("jeeves_router.models.anthropic", "AnthropicModel", "anthropic"),
    "llamacpp": ("jeeves_router.models.llamacpp", "LlamaCppModel", "local"),
}
_CUSTOM: dict[str, Callable[[str], Model]] = {}


def register_provider(prefix: str, factory: Callable[[str], Model]) -> None:
    """Make ``"<prefix>:<model>"`` strings resolve through ``factory(model)``."""
    _CUSTOM[prefix] = factory


def resolve_model(model: Model | str | None, *, what: str = "model") -> Model:
    """Turn a model or a ``"provider:model"`` string into a :class:`Model`.

    Raises:
        UsageError: for a malformed string, an unknown provider, or a provider whose
            optional extra is not installed (the message names the extra).
    """
    if model is None:
        raise UsageError(f"no {what} given: pass model='openai:gpt-4.1-mini' or a Model object")
    if not isinstance(model, str):
        if not isinstance(model, Model):
            raise UsageError(f"{what} must be a Model or a 'provider:model' string, got {type(model).__name__}")
        return model
    prefix, sep, name = model.partition(":")
    if not sep or not prefix or not name:
        raise UsageError(
            f"{what} string {model!r} must look like 'openai:gpt-4.1-mini' or 'anthropic:claude-haiku-4-5'"
        )
    if prefix in _CUSTOM:
        return _CUSTOM[prefix](name)
    if prefix not in _PROVIDERS:
        known = ", ".join(sorted({*_PROVIDERS, *_CUSTOM}))
        raise UsageError(f"unknown model provider {prefix!r} in {model!r}; known providers: {known}")
    module_name, attr, extra = _PROVIDERS[prefix]
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UsageError(
            f"model {model!r} needs the {extra!r} extra: pip install 'jeeves-router[{extra}]' ({exc})"
        ) from exc
    factory = getattr(module, attr)
    resolved: Model = factory(name)
    return resolved
