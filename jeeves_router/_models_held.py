"""The models an agent tree (or a classifier) holds, and closing them when whatever runs it stops.

A model adapter builds its HTTP client on its first call, on the event loop of that call,
and keeps it (:class:`~jeeves_router.models._sdk.SdkModel`). The HTTP server and the MCP
server run their agents on their own loop, and the CLI runs an imported classifier on one,
so when they stop they close what those models built (:func:`aclose_models`): left open,
such a client is finalised later by the garbage collector, on whatever loop is running then.
``aclose()`` closes only a client the model built itself (a client passed as ``client=``
stays open), and a later call builds a new one.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import anyio

from .actor import Actor
from .architectures.capabilities import Capabilities
from .architectures.router import Router
from .graph import tree_agents
from .models.base import Model

__all__ = ["aclose_models", "held_models"]

log = logging.getLogger("jeeves_router.models")


def _resolved(owner: Any) -> Model | None:
    """``owner.model`` if it is a model; the adapter resolved from its string, if resolved yet."""
    model = owner.model
    return getattr(owner, "_model", None) if isinstance(model, str) else model


def _classifier_models(classifier: Any) -> list[Model | None]:
    from .classify.cascade import CascadeClassifier  # imported by routers only when they classify with a model
    from .classify.llm import LLMClassifier
    from .classify.toolcall import ToolCallClassifier

    if isinstance(classifier, (LLMClassifier, ToolCallClassifier)):
        return [_resolved(classifier)]
    if isinstance(classifier, CascadeClassifier):
        return [*_classifier_models(classifier.first), *_classifier_models(classifier.second)]
    return []


def _explain_models(arch: Any) -> list[Model | None]:
    """The ``Recovery(explain_model=...)`` of ``arch``, and of the architecture it wraps (a chain's turns)."""
    return [getattr(getattr(a, "recovery", None), "explain_model", None) for a in (arch, getattr(arch, "wraps", None))]


def held_models(agents: Iterable[Actor] = (), *, classifiers: Iterable[Any] = ()) -> list[Model]:
    """The models the trees of ``agents`` and ``classifiers`` hold now, each once (an unresolved string holds none).

    That is each agent's model, a router's classifier model(s), a
    :class:`~jeeves_router.architectures.capabilities.Capabilities`' classifier and orchestrator
    models, the model of an LLM or tool-call classifier (both stages of a cascade), and the
    ``explain_model`` of an architecture's ``Recovery``.
    """
    found: list[Model | None] = []
    for classifier in classifiers:
        found.extend(_classifier_models(classifier))
    for agent in tree_agents(*agents):
        found.append(_resolved(agent))
        arch = agent.architecture
        found.extend(_explain_models(arch))
        if isinstance(arch, Router):
            found.extend(_classifier_models(getattr(arch, "_classifier", None)))
        elif isinstance(arch, Capabilities):
            found.extend(m for m in (arch.classifier_model, arch.orchestrator_model) if not isinstance(m, str))
            found.extend(arch.resolved_models.values())
    unique: dict[int, Model] = {}
    for model in found:
        if model is not None:
            unique.setdefault(id(model), model)
    return list(unique.values())


async def aclose_models(agents: Iterable[Actor] = (), *, classifiers: Iterable[Any] = ()) -> None:
    """Close the HTTP clients the models of :func:`held_models` built (``aclose()``, where a model has one).

    Every model is closed: one whose ``aclose()`` fails is logged (a warning naming the model
    and the error's type) and the others are still closed. A cancellation stops the walk.
    """
    for model in held_models(agents, classifiers=classifiers):
        close = getattr(model, "aclose", None)
        if close is None:
            continue
        try:
            await close()
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as exc:  # one model's failure must not leave the rest open
            log.warning(
                "closing a model failed",
                extra={"model": getattr(model, "name", type(model).__name__), "error_type": type(exc).__name__},
            )
