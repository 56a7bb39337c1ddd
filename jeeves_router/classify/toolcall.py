"""Classification by tool call: the model must call one ``classify_as_<route>`` tool.

A :class:`~jeeves_router.classify.types.Classifier`, so a :class:`~jeeves_router.Router`
gets tool-call classification with everything the Router has (threshold, fallback,
recovery, history, context, sticky sessions, handoffs, force_route, usage by route)::

    Router(routes, classifier=ToolCallClassifier("openai:gpt-4.1-nano"), fallback_route="general")

(:class:`~jeeves_router.HandoffRouter` is that Router preset, on the router agent's model.)

The request forces a tool call (``tool_choice="required"``); the route is read from the
called tool's name, never from text, and the confidence from its arguments. A reply with
no tool call, a call of a tool that is not offered, or a call whose arguments are not a
valid JSON object is answered once with a correction (``max_format_retries``); after that
the classification fails closed (``missing_route`` / ``unknown_route`` /
``invalid_confidence``: unreadable arguments are never taken for a call without a
confidence, so ``on_missing_confidence`` does not apply to them) and the Router's fallback
decides. A confidence that is not a number within [0, 1] is ``invalid_confidence``: the
fallback, not the route.
The confidence is read as a reply's text is (a JSON number, or a string such as ``"0.9"``
or ``"85%"``, see :func:`~jeeves_router.classify.confidence.read_confidence`).
When the model calls several classify tools at once, the first wins and the second is
reported as the ``runner_up`` (with its confidence).
"""

from __future__ import annotations

from typing import Any

from ..errors import UsageError
from ..messages import Message, ToolCallPart, ToolResultPart, user
from ..models.base import Model, ModelRequest, ToolSpec
from ..models.registry import check_model, resolve_model
from ..policies import check_count, check_number
from ..usage import NO_USAGE
from .confidence import read_confidence
from .parser import normalize_route_name
from .types import Classification, ClassifyRequest, ClassifyResult, ParseStatus, RouteSpec, with_spent_usage

__all__ = ["ToolCallClassifier", "CLASSIFY_PREFIX", "route_tool"]

CLASSIFY_PREFIX = "classify_as_"

_SYSTEM = (
    "You are a router. Your only job is to call exactly one of the classify_as_<route> tools; never answer "
    "the user yourself. Give a short reason and your confidence between 0 and 1."
)
_ARGS = {
    "type": "object",
    "properties": {
        "reason": {"type": "string", "description": "Why this route fits, in a few words."},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
    },
    "required": ["reason", "confidence"],
}


def route_tool(spec: RouteSpec) -> ToolSpec:
    """The ``classify_as_<route>`` tool for one route (its description and a few examples)."""
    text = f"Route the request to '{spec.name}'" + (f": {spec.description}" if spec.description else ".")
    if spec.examples:
        text += " Examples: " + "; ".join(repr(e) for e in list(spec.examples)[:5])
    return ToolSpec(f"{CLASSIFY_PREFIX}{spec.name}", text, _ARGS)


def _confidence(value: Any, on_missing: float | None) -> tuple[float, ParseStatus]:
    if value is None:
        return (on_missing, "ok") if on_missing is not None else (0.0, "missing_confidence")
    x, _ = read_confidence(value)  # the one reader: a JSON number, or a string such as "0.9" or "85%"
    return (0.0, "invalid_confidence") if x is None else (x, "ok")


class ToolCallClassifier:
    """A classifier whose model answers by calling one ``classify_as_<route>`` tool.

    Args:
        model: The router model (a :class:`Model` or ``"provider:model"``).
        instructions: Extra instructions added to the router's system prompt.
        max_format_retries: Corrections of a reply without a usable tool call (default 1).
        on_missing_confidence: The confidence assumed when the call gives none
            (``None``: ``missing_confidence``, i.e. fail closed).
        max_tokens: Output cap of the router call.

    Raises:
        UsageError: For an option of the wrong type or out of its range, naming it.

    Example:
        >>> from jeeves_router import Agent, Router, RouterRoute
        >>> from jeeves_router.classify.toolcall import ToolCallClassifier
        >>> from jeeves_router.testing import Call, ScriptedModel
        >>> router_model = ScriptedModel([Call("classify_as_billing", {"reason": "refund", "confidence": 0.9})])
        >>> billing = Agent("You resolve payments.", name="billing", model=ScriptedModel(["Refund issued."]))
        >>> desk = Agent("Support desk", name="desk", architecture=Router(
        ...     [RouterRoute("billing", billing, "payments, refunds")],
        ...     classifier=ToolCallClassifier(router_model),
        ... ))
        >>> result = desk.run_sync("Please refund my order")
        >>> result.route, result.confidence, result.output
        ('billing', 0.9, 'Refund issued.')
        >>> request = router_model.requests[0]  # a classify_as_<route> tool per route; a call is required
        >>> [tool.name for tool in request.tools], request.tool_choice
        (['classify_as_billing'], 'required')
    """

    def __init__(
        self,
        model: Model | str,
        *,
        instructions: str | None = None,
        max_format_retries: int = 1,
        on_missing_confidence: float | None = None,
        max_tokens: int = 128,
    ) -> None:
        check_count("max_format_retries", max_format_retries, 0)
        check_count("max_tokens", max_tokens, 1)
        if on_missing_confidence is not None:
            check_number("on_missing_confidence (or None)", on_missing_confidence, low=0, high=1)
        if instructions is not None and not isinstance(instructions, str):
            raise UsageError(f"instructions must be a string or None, got {type(instructions).__name__}")
        self.model = model
        check_model(model, what="classifier model")
        self._model: Model | None = None if isinstance(model, str) else resolve_model(model)
        self.instructions = instructions
        self.max_format_retries = max_format_retries
        self.on_missing_confidence = on_missing_confidence
        self.max_tokens = max_tokens

    def __repr__(self) -> str:
        return f"ToolCallClassifier({self.model!r})"

    def _system(self, request: ClassifyRequest) -> str:
        parts = [_SYSTEM]
        if self.instructions:
            parts.append(self.instructions.strip())
        if request.context:
            ctx = "\n".join(f"{k}: {v}" for k, v in sorted(request.context.items(), key=lambda kv: str(kv[0])))
            parts.append("Context:\n" + ctx)
        if request.feedback:
            parts.append("A previous attempt failed: " + request.feedback)
        return "\n\n".join(parts)

    async def classify(self, request: ClassifyRequest) -> ClassifyResult:
        """Ask the model for one ``classify_as_<route>`` call and read the route from it."""
        if self._model is None:
            self._model = resolve_model(self.model, what="classifier model")
        model = self._model
        tools = tuple(route_tool(s) for s in request.routes)
        names = {normalize_route_name(s.name): s.name for s in request.routes}
        messages: list[Message] = [*request.history, user(request.text)]
        usage = NO_USAGE
        attempts = 0
        while True:
            attempts += 1
            try:
                response = await model.request(
                    ModelRequest(
                        messages=tuple(messages),
                        system=self._system(request),
                        tools=tools,
                        tool_choice="required",
                        temperature=0.0,
                        max_tokens=self.max_tokens,
                        purpose="classify",
                    )
                )
            except Exception as exc:
                if usage is not NO_USAGE:  # earlier replies of this classification were paid for
                    with_spent_usage(exc, usage)
                raise
            usage = usage + response.usage
            c, problem = self._read(response.tool_calls, names)
            if c.ok or problem is None or attempts > self.max_format_retries:
                return ClassifyResult(c, usage=usage, stage="tool_call", model_calls=attempts, attempts=attempts)
            reply = response.as_message()
            messages.append(reply)
            results = tuple(ToolResultPart(call.id, call.name, problem, True) for call in response.tool_calls)
            messages.append(Message("tool", results) if results else user(problem))

    def _read(self, calls: tuple[ToolCallPart, ...], names: dict[str, str]) -> tuple[Classification, str | None]:
        """The classification of the first call, and a correction to send when it is unusable."""
        offered = ", ".join(f"{CLASSIFY_PREFIX}{n}" for n in names.values())
        if not calls:
            correction = f"You replied without calling a tool. Call exactly one of: {offered}."
            return Classification(None, 0.0, "missing_route", "tool:none"), correction
        call = calls[0]
        raw = f"tool:{call.name}"
        requested = call.name.removeprefix(CLASSIFY_PREFIX)
        route = names.get(normalize_route_name(requested)) if call.name.startswith(CLASSIFY_PREFIX) else None
        if route is None:
            correction = f"{call.name} is not one of the tools. Call exactly one of: {offered}."
            return Classification(None, 0.0, "unknown_route", raw, requested=requested), correction
        if call.argument_error is not None:  # not "no confidence given": the model's arguments are unreadable
            correction = (
                f"The arguments of {call.name} were not a valid JSON object ({call.argument_error}). Call exactly one "
                f'of the tools again with arguments such as {{"reason": "...", "confidence": 0.8}}.'
            )
            return Classification(None, 0.0, "invalid_confidence", raw, requested=route), correction
        args = call.arguments
        reason = args.get("reason") if isinstance(args.get("reason"), str) else None
        confidence, status = _confidence(args.get("confidence"), self.on_missing_confidence)
        runner_up, runner_up_confidence = self._runner_up(calls[1:], names, route)
        c = Classification(
            route if status == "ok" else None,
            confidence,
            status,
            raw,
            reason=reason,
            requested=route,
            runner_up=runner_up,
            runner_up_confidence=runner_up_confidence,
        )
        return c, None

    def _runner_up(
        self, calls: tuple[ToolCallPart, ...], names: dict[str, str], first: str
    ) -> tuple[str | None, float | None]:
        """The route of the next call (of several in one reply) that names another route."""
        for call in calls:
            name = names.get(normalize_route_name(call.name.removeprefix(CLASSIFY_PREFIX)))
            if call.name.startswith(CLASSIFY_PREFIX) and name is not None and name != first:
                confidence, status = _confidence(call.arguments.get("confidence"), self.on_missing_confidence)
                return name, confidence if status == "ok" else None
        return None, None
