"""Resolve model strings like ``"openai:gpt-4.1-mini"`` to :class:`Model` objects, lazily."""

from __future__ import annotations

import importlib
from collections.abc import Callable

from ..errors import UsageError
from .base import Model

__all__ = ["check_model", "resolve_model", "register_provider", "ModelLike"]

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


def check_model(model: object, *, what: str = "model") -> None:
    """Refuse a model :func:`resolve_model` would refuse for its form, without importing anything.

    Constructors call it so that a typo (``"anthropc:..."``, ``"gpt-4o-mini"`` without its
    provider) fails where the agent is built, not at its first request; ``None`` passes.

    Raises:
        UsageError: for a value that is neither a Model nor a string, a malformed string, or
            an unknown provider (registered ones count: :func:`register_provider`).
    """
    if model is None or isinstance(model, Model):
        return
    if not isinstance(model, str):
        raise UsageError(f"{what} must be a Model or a 'provider:model' string, got {type(model).__name__}")
    prefix, sep, name = model.partition(":")
    if not sep or not prefix or not name:
        raise UsageError(
            f"{what} {model!r} must look like 'provider:model', e.g. 'openai:gpt-4.1-mini' or "
            "'anthropic:claude-haiku-4-5'"
        )
    if prefix not in _PROVIDERS and prefix not in _CUSTOM:
        known = ", ".join(sorted({*_PROVIDERS, *_CUSTOM}))
        raise UsageError(
            f"unknown model provider {prefix!r} in {model!r}; known providers: {known} "
            "(register another with jeeves_router.models.register_provider before building what uses it)"
        )


def resolve_model(model: Model | str | None, *, what: str = "model") -> Model:
    """Turn a model or a ``"provider:model"`` string into a :class:`Model`.

    Raises:
        UsageError: for a malformed string, an unknown provider, or a provider whose
            optional extra is not installed (the message names the extra).
    """
    if model is None:
        raise UsageError(f"no {what} given: pass model='openai:gpt-4.1-mini' or a Model object")
    check_model(model, what=what)
    if not isinstance(model, str):
        return model
    prefix, _, name = model.partition(":")
    if prefix in _CUSTOM:
        return _CUSTOM[prefix](name)
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
