"""OpenTelemetry spans for runs, model calls and tool calls (GenAI semantic conventions).

Install the ``otel`` extra (``opentelemetry-api``) and configure a tracer provider in your
application (the SDK and an exporter are yours to choose); jeeves_router then reports:

- ``invoke_agent {agent}`` for every agent run — router, specialist, capability handler,
  handoff target — nested as they ran, with the session id as ``gen_ai.conversation.id``,
  the run's status, route and token usage. The routing decision is a span event
  ``jeeves_router.route.decision`` (route, confidence, runner-up, threshold, classifier
  kind) and its outcome is on the span (``jeeves_router.route``, ``...confidence``,
  ``...fallback_reason``: the result's, or for a run that failed or was cut short how far its
  routing got, as the served headers say it);
  fallbacks, recovery steps (retry, reclassify, replan, report), handoffs, capability
  selection and steps, and restarted streams are span events too.
- ``chat {model}`` for every model call attempt (``gen_ai.provider.name``,
  ``gen_ai.request.model``, ``gen_ai.response.model``, ``gen_ai.usage.input_tokens`` /
  ``output_tokens``, ``gen_ai.response.finish_reasons``, ``error.type``); a retried call
  gives one span per attempt (``jeeves_router.attempt``), a failed attempt's with the tokens
  its provider had reported (a stream that broke mid-way). A cancelled call, streamed or not, is
  not a failure: its status stays ``UNSET`` and ``jeeves_router.cancelled`` is set.
- ``execute_tool {tool}`` for every tool execution, made where the tool runs
  (``gen_ai.tool.name``, ``gen_ai.tool.call.id``, ``error.type`` when the tool failed).

Prompt, completion, tool argument and tool result text are recorded only when you opt in
with ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``.

Cost when off: each run and model call asks :func:`active_tracer`, which returns ``None``
after one dictionary lookup when the application never imported OpenTelemetry (nothing is
imported here), and after one call and one identity check when it did but configured no
tracer provider. The spans nest under whatever span is current when a run starts.

This module starts and ends the spans; :mod:`jeeves_router._span_attrs` says what they show.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from ._routing import routing_update
from ._span_attrs import (
    CAPTURE_CONTENT_ENV,
    cancelled,
    capture_content,
    chat_response,
    chat_span,
    chat_usage,
    fail,
    messages,
    on_event,
    routing,
)
from .events import Event

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

__all__ = [
    "CAPTURE_CONTENT_ENV",
    "active_tracer",
    "traced_model_call",
    "traced_model_stream",
    "traced_run",
    "traced_tool_call",
]

T = TypeVar("T")
#: Turns a failed model call's exception into the error its span shows (``None``: itself).
Describe = Callable[[BaseException], "BaseException | None"]

_cache: list[Any] = [None, None]  # [provider, its tracer or None]: the no-op check runs once per provider
_UNSET = object()
_env_provider: list[bool] = []  # whether OTEL_PYTHON_TRACER_PROVIDER names a provider (read once)


def active_tracer() -> Tracer | None:
    """jeeves_router's tracer when the application configured a tracer provider, else ``None``."""
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:  # the application never imported OpenTelemetry: nothing can be configured
        return None
    # The API's global is read directly: with no provider set, get_tracer_provider() looks the
    # environment up on every call (a caught KeyError, 1-5 us), which alone cost 5% of a routed
    # request. It is still called when a provider is set, or named by OTEL_PYTHON_TRACER_PROVIDER
    # (checked once), and whenever the global is not where this expects it.
    provider = getattr(trace, "_TRACER_PROVIDER", _UNSET)
    if provider is None:
        if not _env_provider:
            _env_provider.append("OTEL_PYTHON_TRACER_PROVIDER" in os.environ)
        if not _env_provider[0]:
            return None
    if provider is not _cache[0]:
        provider = trace.get_tracer_provider()
        if provider is not _cache[0]:
            noop = isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider))
            _cache[:] = [provider, None if noop else provider.get_tracer("jeeves_router")]
    tracer: Tracer | None = _cache[1]
    return tracer


# -- agent runs ------------------------------------------------------------------------------


def traced_run(events: AsyncIterator[Event], agent: Any, ctx: Any) -> AsyncIterator[Event]:
    """``events`` (one agent run's architecture events) inside an ``invoke_agent`` span.

    Returns ``events`` unchanged when no tracer provider is configured.
    """
    tracer = active_tracer()
    if tracer is None:
        return events
    return _run_span(tracer, events, agent, ctx)


async def _run_span(tracer: Tracer, events: AsyncIterator[Event], agent: Any, ctx: Any) -> AsyncIterator[Event]:
    from opentelemetry import context as otel_context
    from opentelemetry import trace

    model = agent.model if isinstance(agent.model, str) or agent.model is None else getattr(agent.model, "name", None)
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": agent.name,
        "gen_ai.conversation.id": ctx.session_id,
        "jeeves_router.path": "/".join(ctx.path),
        "jeeves_router.architecture": type(agent.architecture).__name__,
    }
    if model:
        attributes["gen_ai.request.model"] = str(model).partition(":")[2] or str(model)
    content = capture_content()
    if content:
        attributes["gen_ai.input.messages"] = messages("user", ctx.prompt)
    span = tracer.start_span(f"invoke_agent {agent.name}", kind=trace.SpanKind.INTERNAL, attributes=attributes)
    current = trace.set_span_in_context(span)
    finished = False
    routed: dict[str, Any] = {}  # the decision so far, by the rule the served headers use
    mark = ctx.ledger.mark()  # a failed run's span reports what it spent, as its run.failed event does
    try:
        while True:
            token = otel_context.attach(current)  # the run's steps (models, tools, child runs) nest under it
            try:
                ev = await events.__anext__()
            except StopAsyncIteration:
                break
            finally:
                otel_context.detach(token)
            if ev.path == ctx.path:
                on_event(span, ev)
                routed.update(routing_update(ev) or {})
            yield ev
        finished = True
        result = ctx.result
        if result is not None:
            span.set_attribute("jeeves_router.run.status", result.status)
            routed.update(route=result.route, confidence=result.confidence, fallback_reason=result.fallback_reason)
            span.set_attribute("gen_ai.usage.input_tokens", result.usage.input_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", result.usage.output_tokens)
            if content and result.output is not None:
                span.set_attribute("gen_ai.output.messages", messages("assistant", result.output))
    except Exception as exc:
        finished = True
        spent = ctx.ledger.since(mark, ctx.path)
        span.set_attribute("gen_ai.usage.input_tokens", spent.input_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", spent.output_tokens)
        fail(span, exc)
        raise
    finally:
        try:
            if not finished:  # the consumer closed the stream early (or the run was cancelled)
                span.set_attribute("jeeves_router.run.status", "closed_early")
                aclose = getattr(events, "aclose", None)
                if aclose is not None:
                    token = otel_context.attach(current)
                    try:
                        await aclose()  # the run's own cleanup (closing model streams) still nests under it
                    finally:
                        otel_context.detach(token)
        finally:  # a cleanup that raised (or was cancelled) still ends the span
            routing(span, routed)  # the result's decision, else how far the routing got
            span.end()


# -- tool calls ------------------------------------------------------------------------------


async def traced_tool_call(name: str, call_id: str, arguments: Mapping[str, Any], call: Callable[[], Any]) -> Any:
    """``await call()`` — one execution of a tool — inside an ``execute_tool {name}`` span when tracing is on.

    Made where the tool runs, like a ``chat`` span where the model is called: a call answered
    from the journal (a replay) or from the run's ledger (a retry) executes nothing and has none.
    """
    tracer = active_tracer()
    if tracer is None:
        return await call()
    from opentelemetry import trace
    from opentelemetry.trace import Status, StatusCode

    attrs: dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name}
    attrs.update({"gen_ai.tool.call.id": call_id, "gen_ai.tool.type": "function"})
    content = capture_content()
    if content:
        attrs["gen_ai.tool.call.arguments"] = json.dumps(dict(arguments), ensure_ascii=False, default=str)
    span = tracer.start_span(f"execute_tool {name}", kind=trace.SpanKind.INTERNAL, attributes=attrs)
    try:
        outcome = await call()
    except Exception as exc:
        fail(span, exc)
        raise
    else:
        if getattr(outcome, "is_error", False):
            span.set_attribute("error.type", "tool_error")
            span.set_status(Status(StatusCode.ERROR))
        if content:
            span.set_attribute("gen_ai.tool.call.result", str(getattr(outcome, "content", outcome)))
        return outcome
    finally:
        span.end()


# -- model calls -----------------------------------------------------------------------------


def _chat_failed(span: Span, exc: BaseException, describe: Describe | None) -> None:
    fail(span, exc, describe(exc) if describe is not None else None)
    spent = getattr(exc, "spent_usage", None)  # what the attempt's provider had reported (a broken stream's)
    if spent is not None and spent.total_tokens:
        chat_usage(span, spent)
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):  # HTTP failures are known by their status (low cardinality)
        span.set_attribute("error.type", str(status))


async def traced_model_call(
    model_name: str, attempt: int, call: Callable[[int], Any], describe: Describe | None = None
) -> Any:
    """``await call(attempt)`` — one model request — inside a ``chat {model}`` span when tracing is on.

    ``describe`` turns a failure into the error the span shows (an adapter passes its error
    mapping, which masks its API key); ``None`` or no answer shows the failure itself. A
    cancelled call is not a failure: its span keeps the status ``UNSET`` and says
    ``jeeves_router.cancelled`` (OpenTelemetry's ``ERROR`` means the operation failed), as a
    cancelled stream's does.
    """
    tracer = active_tracer()
    if tracer is None:
        return await call(attempt)
    span = chat_span(tracer, model_name, attempt)
    try:
        response = await call(attempt)
    except Exception as exc:
        _chat_failed(span, exc, describe)
        span.end()
        raise
    except BaseException as exc:  # cancelled: not an error (see _span_attrs.cancelled), as for a stream
        cancelled(span, exc)
        span.end()
        raise
    chat_response(span, response)
    span.end()
    return response


def traced_model_stream(
    model_name: str, attempt: int, stream: AsyncIterator[T], describe: Describe | None = None
) -> AsyncIterator[T]:
    """``stream`` — one streamed model call — inside a ``chat {model}`` span when tracing is on.

    ``describe`` as for :func:`traced_model_call`.
    """
    tracer = active_tracer()
    if tracer is None:
        return stream
    return _stream_span(tracer, model_name, attempt, stream, describe)


async def _stream_span(
    tracer: Tracer, model_name: str, attempt: int, stream: AsyncIterator[T], describe: Describe | None
) -> AsyncIterator[T]:
    span = chat_span(tracer, model_name, attempt)
    answered = False
    try:
        async for item in stream:
            if hasattr(item, "stop_reason"):  # the final ModelResponse
                chat_response(span, item)
                answered = True
            yield item
    except Exception as exc:
        _chat_failed(span, exc, describe)
        raise
    except BaseException as exc:  # cancelled, or closed early: not an error, as for a call
        cancelled(span, exc, answered=answered)
        raise
    finally:
        try:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
        finally:  # a stream whose closing raised (or was cancelled) still ends the span
            span.end()
