"""What the Router's classifier is asked, and what the Router makes of its answer.

The request (:func:`classify_request`): the request text, the routes not excluded, the last
``history_turns`` turns of history (:func:`last_turns`) and the run's context as the
classifier sees it (validated by ``context_schema``: :func:`visible_context`), with the
feedback of a hand-back. The answer: held to the route contract (:func:`checked`, never an
undeclared route) and reported as the ``router.classified`` event (:func:`classified_event`).
:class:`~.router.Router`'s methods of the same names call these.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..._frozen import constructor
from ...classify.types import ClassifyRequest, ClassifyResult, classify_result
from ...events import RouterClassified
from ...messages import Message, TextPart
from ..base import RunContext
from .contract import within_contract

if TYPE_CHECKING:
    from pydantic import BaseModel

    from .router import Router

__all__ = ["checked", "classified_event", "classify_request", "last_turns", "visible_context"]

# one of each per routed run, built without type.__call__ (see constructor)
_classified = constructor(RouterClassified)
_request = constructor(ClassifyRequest)


def last_turns(history: Sequence[Message], n: int) -> tuple[Message, ...]:
    """The last ``n`` turns of ``history`` (a turn starts at a user message with text)."""
    if n <= 0:
        return ()
    starts = [i for i, m in enumerate(history) if m.role == "user" and any(isinstance(p, TextPart) for p in m.parts)]
    if len(starts) <= n:
        return tuple(history)
    return tuple(history[starts[-n] :])


def visible_context(schema: type[BaseModel] | None, context: Mapping[str, Any]) -> Mapping[str, Any]:
    """The context as the classifier sees it (validated by ``schema``, as JSON values)."""
    if schema is None or not context:
        return context
    try:
        dumped: dict[str, Any] = schema.model_validate(dict(context)).model_dump(mode="json")
    except Exception:  # pydantic's ValidationError: a tool changed it mid-run; show it as it is
        return context
    return dumped


def classify_request(
    router: Router,
    ctx: RunContext,
    *,
    exclude: Sequence[str] = (),
    feedback: str | None = None,
    context: Mapping[str, Any] | None = None,
) -> ClassifyRequest:
    """What ``router``'s classifier is asked for ``ctx.prompt``."""
    specs = router.specs if not exclude else tuple(s for s in router.specs if s.name not in exclude)
    history = last_turns(ctx.history, router.history_turns) if router.history_turns else ()
    seen = ctx.context if context is None else context
    if router.context_schema is not None:
        seen = router.visible_context(seen)
    return _request(ctx.prompt, specs, history=history, context=seen, feedback=feedback)


def checked(
    router: Router, result: ClassifyResult, request: ClassifyRequest, exclude: Sequence[str] = ()
) -> ClassifyResult:
    """``result`` held to the route contract of ``request``."""
    result = classify_result(result, router._classifier)
    allowed = router._names if not exclude else {s.name for s in request.routes}
    held = within_contract(result.classification, allowed)
    return result if held is result.classification else replace(result, classification=held)


def classified_event(router: Router, ctx: RunContext, result: ClassifyResult) -> RouterClassified:
    """The ``router.classified`` event for ``result``."""
    c = result.classification
    return _classified(
        session_id=ctx.session_id,
        path=ctx.path,
        route=c.route,
        confidence=c.confidence,
        status=c.status,
        threshold=router.threshold,
        raw=c.raw,
        reason=c.reason,
        requested=c.requested,
        runner_up=c.runner_up,
        runner_up_confidence=c.runner_up_confidence,
        margin=c.margin,
        stage=result.stage,
        attempts=result.attempts,
        model_calls_saved=result.model_calls_saved,
    )
