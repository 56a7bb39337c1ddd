"""What jeeves_router's spans show: GenAI semantic-convention attributes, events and failures.

:mod:`jeeves_router.tracing` decides when spans start and end; this module decides what goes
on them (the span of a run from its own events, a ``chat`` span from the model's response, a
failure as an exception event), so the mapping can be read, and changed, in one place.
"""

from __future__ import annotations

import json
import os
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ._log import redact
from .events import (
    CapabilitiesSelected,
    CapabilityCompleted,
    CapabilityStarted,
    Event,
    HandoffCompleted,
    HandoffRejected,
    HandoffRequested,
    RecoveryReclassify,
    RecoveryReplan,
    RecoveryReport,
    RecoveryRetry,
    RouterClassified,
    RouterDispatched,
    RouterFallback,
    RouterUnresolved,
)

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

__all__ = [
    "CAPTURE_CONTENT_ENV",
    "cancelled",
    "capture_content",
    "chat_response",
    "chat_span",
    "chat_usage",
    "fail",
    "messages",
    "on_event",
    "routing",
]

CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


def capture_content() -> bool:
    return os.environ.get(CAPTURE_CONTENT_ENV, "").strip().lower() in ("1", "true", "yes")


def messages(role: str, text: str | None) -> str:
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text or ""}]}], ensure_ascii=False)


def cancelled(span: Span, exc: BaseException, *, answered: bool = False) -> None:
    """Mark ``span`` as ended by ``exc``, a cancellation (or an interruption), not a failure.

    OpenTelemetry's status ``ERROR`` means the operation failed; a call cancelled by its caller
    (a timeout, a client that went away, a stream closed by its consumer) did not, so the status
    stays ``UNSET`` and ``jeeves_router.cancelled`` says the call was cut short. A stream closed
    (``GeneratorExit``) once its response was read (``answered``) was not cut short: not marked.
    """
    if not (answered and isinstance(exc, GeneratorExit)):
        span.set_attribute("jeeves_router.cancelled", True)


def fail(span: Span, exc: BaseException, shown: BaseException | None = None) -> None:
    """Mark ``span`` failed by ``exc``; the exception event shows ``shown`` (default ``exc``).

    The event carries the exception's own message and traceback, not those of its causes (a
    provider SDK's error, kept as a :class:`ModelError`'s cause, may quote the API key), and
    key-shaped text is masked as in the logs.
    """
    from opentelemetry.trace import Status, StatusCode

    shown = exc if shown is None else shown
    message = redact(str(shown))
    stack = "".join(traceback.format_exception(type(shown), shown, shown.__traceback__, chain=False))
    span.set_attribute("error.type", type(exc).__qualname__)
    span.record_exception(shown, {"exception.message": message, "exception.stacktrace": redact(stack)})
    span.set_status(Status(StatusCode.ERROR, message[:300]))


def on_event(span: Span, ev: Event) -> None:
    """Reflect one of the run's own events on its span (decision and recovery events)."""
    if isinstance(ev, RouterClassified):
        decision: dict[str, Any] = {
            "jeeves_router.route": ev.route or "",
            "jeeves_router.route.confidence": ev.confidence,
            "jeeves_router.route.threshold": ev.threshold,
            "jeeves_router.route.status": ev.status,
            "jeeves_router.classifier.kind": ev.stage,
            "jeeves_router.classifier.attempts": ev.attempts,
        }
        if ev.runner_up is not None:
            decision["jeeves_router.route.runner_up"] = ev.runner_up
        if ev.runner_up_confidence is not None:
            decision["jeeves_router.route.runner_up_confidence"] = ev.runner_up_confidence
        span.add_event("jeeves_router.route.decision", decision)  # every classification, usable or not
        span.set_attribute("jeeves_router.route.threshold", ev.threshold)
        span.set_attribute("jeeves_router.classifier.kind", ev.stage)
    else:
        attrs_of = _EVENT_ATTRIBUTES.get(type(ev))
        if attrs_of is not None:
            span.add_event(f"jeeves_router.{ev.kind}", {k: v for k, v in attrs_of(ev).items() if v is not None})


_EVENT_ATTRIBUTES: dict[type, Callable[[Any], dict[str, Any]]] = {
    RouterDispatched: lambda e: {"jeeves_router.route": e.route, "jeeves_router.forced": e.forced},
    RouterFallback: lambda e: {
        "jeeves_router.route.fallback_reason": e.reason,
        "jeeves_router.route": e.fallback_route,
        "jeeves_router.route.requested": e.requested_route,
        "jeeves_router.route.confidence": e.confidence,
    },
    RouterUnresolved: lambda e: {"jeeves_router.route.fallback_reason": e.reason},
    RecoveryRetry: lambda e: {
        "jeeves_router.operation": e.operation,
        "jeeves_router.attempt": e.attempt,
        "jeeves_router.retry.delay_s": e.delay_s,
        "jeeves_router.severity": e.severity,
        "error.type": e.error.partition(":")[0],
    },
    RecoveryReclassify: lambda e: {"jeeves_router.attempt": e.attempt, "jeeves_router.excluded": list(e.excluded)},
    RecoveryReplan: lambda e: {"jeeves_router.attempt": e.attempt},
    RecoveryReport: lambda e: {"jeeves_router.severity": e.severity},
    HandoffRequested: lambda e: {"jeeves_router.handoff.from": e.from_agent, "jeeves_router.handoff.to": e.to_agent},
    HandoffCompleted: lambda e: {"jeeves_router.handoff.from": e.from_agent, "jeeves_router.handoff.to": e.to_agent},
    HandoffRejected: lambda e: {
        "jeeves_router.handoff.from": e.from_agent,
        "jeeves_router.handoff.to": e.to_agent,
        "jeeves_router.handoff.why": e.why,
    },
    CapabilitiesSelected: lambda e: {
        "jeeves_router.capabilities": list(e.capabilities),
        "jeeves_router.capabilities.skipped": list(e.skipped),
        "jeeves_router.capabilities.bypass": e.bypass,
    },
    CapabilityStarted: lambda e: {"jeeves_router.capability": e.capability, "jeeves_router.step": e.step},
    CapabilityCompleted: lambda e: {
        "jeeves_router.capability": e.capability,
        "jeeves_router.step": e.step,
        "jeeves_router.ok": e.ok,
        "jeeves_router.duration_s": e.duration_s,
        # set only for a step answered by an earlier step's result (after a replan), not run again
        "jeeves_router.capability.answered_from": e.answered_from or None,
        # set only for a retry's function call answered from the attempt ledger, not run again
        "jeeves_router.capability.from_ledger": e.from_ledger or None,
    },
}


_ROUTING = (
    ("route", "jeeves_router.route"),
    ("confidence", "jeeves_router.route.confidence"),
    ("fallback_reason", "jeeves_router.route.fallback_reason"),
)


def routing(span: Span, routed: dict[str, Any]) -> None:
    """The run's routing on its span: ``route``, ``confidence`` and ``fallback_reason`` of ``routed``.

    ``routed`` is the result's decision, or for a run without a result (failed, cut short) the
    fold of :func:`~jeeves_router.events.routing_update` over its events, the rule of the served
    headers: never the last classifier reply's (each reply is a ``route.decision`` event).
    """
    for key, attribute in _ROUTING:
        if routed.get(key) is not None:
            span.set_attribute(attribute, routed[key])


_FINISH = {"end": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_calls": "tool_calls"}


def chat_span(tracer: Tracer, model_name: str, attempt: int) -> Span:
    from opentelemetry import trace

    provider, _, model = model_name.partition(":")
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": provider if model else "unknown",
        "gen_ai.request.model": model or provider,
        "jeeves_router.attempt": attempt,
    }
    return tracer.start_span(f"chat {model or provider}", kind=trace.SpanKind.CLIENT, attributes=attributes)


def chat_usage(span: Span, usage: Any) -> None:
    """The tokens (and cost, when known) of one model call attempt, a failed one's as its provider reported them."""
    span.set_attribute("gen_ai.usage.input_tokens", usage.input_tokens)
    span.set_attribute("gen_ai.usage.output_tokens", usage.output_tokens)
    if usage.cost_usd is not None:
        span.set_attribute("jeeves_router.cost_usd", usage.cost_usd)


def chat_response(span: Span, response: Any) -> None:
    if getattr(response, "model_name", None):
        span.set_attribute("gen_ai.response.model", response.model_name)
    usage = getattr(response, "usage", None)
    if usage is not None:
        chat_usage(span, usage)
    stop = getattr(response, "stop_reason", None)
    if stop is not None:
        span.set_attribute("gen_ai.response.finish_reasons", [_FINISH.get(stop, stop)])
    if capture_content():
        span.set_attribute("gen_ai.output.messages", messages("assistant", getattr(response, "text", "")))
