"""The LLM classifier: one model call answering ``route:`` / ``confidence:``.

With a model that enforces ``response_format`` (see :mod:`.constrained`), the reply is
constrained to a JSON object naming a declared route; otherwise the text reply is parsed.
"""

from __future__ import annotations

from typing import Literal

from .._frozen import constructor
from .._log import get_logger
from ..errors import ModelError, UsageError
from ..messages import Message, assistant, text_of, user
from ..models.base import Model, ModelRequest
from ..models.registry import check_model, resolve_model
from ..policies import check_count, check_number
from ..usage import NO_USAGE
from .constrained import CONSTRAINED_CLASSIFIER_PROMPT, classification_format, few_shot_turns, supports_constrained
from .parser import parse_classification
from .prompt import DEFAULT_CLASSIFIER_PROMPT, format_error_feedback, render_prompt, validate_prompt_template
from .types import ClassifyRequest, ClassifyResult, RouteSpec, with_spent_usage

__all__ = ["LLMClassifier"]

log = get_logger(__name__)

# one of each per classification, built without type.__call__ (see constructor)
_model_request = constructor(ModelRequest)
_result = constructor(ClassifyResult)

#: HTTP statuses with which a server rejects a ``response_format`` it does not support.
_FORMAT_REJECTED = (400, 422)


class LLMClassifier:
    """Asks a model to name a route, reads the reply with :func:`parse_classification`.

    The system prompt is static for a given route table (so providers can cache it); the
    request, the recent history, hints and feedback go in the user message. Calls use
    temperature 0 and a small output cap. A malformed reply is retried
    ``max_format_retries`` times with the format error shown to the model.

    Constrained replies: when the model declares ``supports_response_format`` (or
    ``constrained=True``), each call carries a JSON schema restricting ``route`` to the
    declared names and ``confidence`` to [0, 1]. If the backend rejects the schema (HTTP
    400/422) in the automatic mode, the classifier falls back to plain text for that model.

    Args:
        model: The model, or a ``"provider:model"`` string resolved at first use.
        prompt: A template with ``{routes}`` / ``{route_names}`` placeholders.
        max_format_retries: Extra attempts after a malformed reply (default 1).
        max_tokens: Output cap per call.
        on_bad_confidence: The parser's policy for a missing or invalid confidence
            (``None``: fail closed).
        constrained: ``"auto"`` (default) constrains replies when the model supports
            it; ``True`` always asks for the schema; ``False`` never does.
        few_shot: Example turns per route, built from the routes' ``examples``, placed
            before the request (0: none).
        few_shot_confidence: The confidence shown in the example replies.
        restrict_to_hints: In constrained requests, allow only the routes named in
            ``ClassifyRequest.hints`` (a cascade's first-stage candidates) when there are
            any; the prompt still lists every route, so it stays cacheable.

    Raises:
        UsageError: For an option of the wrong type or out of its range, naming it.
    """

    def __init__(
        self,
        model: Model | str,
        *,
        prompt: str | None = None,
        max_format_retries: int = 1,
        max_tokens: int = 64,
        on_bad_confidence: float | None = None,
        constrained: bool | Literal["auto"] = "auto",
        few_shot: int = 0,
        few_shot_confidence: float = 0.9,
        restrict_to_hints: bool = False,
    ) -> None:
        check_count("max_format_retries", max_format_retries, 0)
        check_count("max_tokens", max_tokens, 1)
        if on_bad_confidence is not None:
            check_number("on_bad_confidence (or None)", on_bad_confidence, low=0, high=1)
        if constrained not in (True, False, "auto"):
            raise UsageError(f"constrained must be True, False or 'auto', got {constrained!r}")
        check_count("few_shot (examples per route)", few_shot, 0)
        check_number("few_shot_confidence", few_shot_confidence, low=0, high=1)
        if not isinstance(restrict_to_hints, bool):
            raise UsageError(f"restrict_to_hints must be True or False, got {restrict_to_hints!r}")
        self.model = model
        check_model(model, what="classifier model")
        self._model: Model | None = None if isinstance(model, str) else resolve_model(model)
        self._custom_prompt = prompt is not None
        self.prompt = validate_prompt_template(prompt) if prompt is not None else DEFAULT_CLASSIFIER_PROMPT
        self.max_format_retries = max_format_retries
        self.max_tokens = max_tokens
        self.on_bad_confidence = on_bad_confidence
        self.constrained = constrained
        self.few_shot = few_shot
        self.few_shot_confidence = few_shot_confidence
        self.restrict_to_hints = restrict_to_hints
        self._rendered: dict[tuple[tuple[RouteSpec, ...], bool], str] = {}
        self._shots: dict[tuple[tuple[RouteSpec, ...], bool], tuple[Message, ...]] = {}
        # The last (routes, constrained) asked for and its (system prompt, few-shot turns).
        self._last: tuple[object, bool, tuple[str, tuple[Message, ...]]] = (object(), False, ("", ()))
        self._format_rejected = False

    def system_prompt(self, routes: tuple[RouteSpec, ...], *, constrained: bool = False) -> str:
        """The rendered system prompt for ``routes`` (cached).

        A constrained request without a custom prompt asks for the JSON reply the schema
        enforces, so the instruction and the grammar agree.
        """
        key = (routes, constrained)
        text = self._rendered.get(key)
        if text is None:
            template = CONSTRAINED_CLASSIFIER_PROMPT if constrained and not self._custom_prompt else self.prompt
            text = self._rendered[key] = render_prompt(template, routes)
        return text

    def example_turns(self, routes: tuple[RouteSpec, ...], *, constrained: bool = False) -> tuple[Message, ...]:
        """The few-shot turns for ``routes`` (cached; empty when ``few_shot`` is 0)."""
        key = (routes, constrained)
        turns = self._shots.get(key)
        if turns is None:
            turns = self._shots[key] = few_shot_turns(
                routes, per_route=self.few_shot, confidence=self.few_shot_confidence, as_json=constrained
            )
        return turns

    def _prompt_parts(self, routes: tuple[RouteSpec, ...], constrained: bool) -> tuple[str, tuple[Message, ...]]:
        """(system prompt, few-shot turns) for ``routes``.

        A router passes the same routes tuple on every request: it is recognised by
        identity, without hashing every RouteSpec for the caches behind
        :meth:`system_prompt` and :meth:`example_turns`.
        """
        last_routes, last_constrained, parts = self._last
        if last_routes is routes and last_constrained == constrained:
            return parts
        parts = (
            self.system_prompt(routes, constrained=constrained),
            self.example_turns(routes, constrained=constrained),
        )
        self._last = (routes, constrained, parts)
        return parts

    def uses_constraints(self, model: Model) -> bool:
        """Whether requests to ``model`` carry the classification schema."""
        if self.constrained == "auto":
            return supports_constrained(model) and not self._format_rejected
        return bool(self.constrained)

    def allowed_routes(self, request: ClassifyRequest) -> tuple[RouteSpec, ...]:
        """The routes a constrained reply may name (the hinted ones with ``restrict_to_hints``)."""
        if self.restrict_to_hints and request.hints:
            hinted = set(request.hints)
            subset = tuple(r for r in request.routes if r.name in hinted)
            if subset:
                return subset
        return request.routes

    @staticmethod
    def user_message(request: ClassifyRequest) -> Message:
        """The user turn: history, hints and feedback around the request text."""
        if not request.history and not request.hints and not request.feedback and not request.context:
            return user(request.text)
        parts: list[str] = []
        if request.history:
            parts.append("Conversation so far:\n" + text_of(request.history))
        if request.context:
            ctx = "\n".join(f"{k}: {v}" for k, v in sorted(request.context.items(), key=lambda kv: str(kv[0])))
            parts.append("Context:\n" + ctx)
        if request.hints:
            parts.append("Most likely routes (best first): " + ", ".join(request.hints))
        if request.feedback:
            parts.append("A previous attempt failed: " + request.feedback)
        parts.append("Request to route:\n" + request.text)
        return user("\n\n".join(parts))

    async def classify(self, request: ClassifyRequest) -> ClassifyResult:
        """Classify with the model, retrying malformed replies."""
        if self._model is None:
            self._model = resolve_model(self.model, what="classifier model")
        model = self._model
        constrained = self.uses_constraints(model)
        system, shots = self._prompt_parts(request.routes, constrained)
        # a tuple, passed as it is when there are no few-shot turns: no list and no copy per request
        messages: tuple[Message, ...] = (self.user_message(request),)
        usage = NO_USAGE  # the first attempt's usage is then taken as it is (no new object)
        attempts = 0
        while True:
            attempts += 1
            model_request = _model_request(
                messages=(*shots, *messages) if shots else messages,
                system=system,
                temperature=0.0,
                max_tokens=self.max_tokens,
                response_format=classification_format(self.allowed_routes(request)) if constrained else None,
                purpose="classify",
            )
            try:
                response = await model.request(model_request)
            except Exception as exc:
                rejected = isinstance(exc, ModelError) and exc.status_code in _FORMAT_REJECTED
                if not (rejected and constrained and self.constrained == "auto"):
                    if usage is not NO_USAGE:  # earlier replies of this classification were paid for
                        with_spent_usage(exc, usage)
                    raise
                # The backend refused the schema: remember it and ask in plain text instead.
                log.warning(
                    "classifier.response_format_rejected", model=model.name, status=getattr(exc, "status_code", None)
                )
                self._format_rejected = True
                constrained = False
                system, shots = self._prompt_parts(request.routes, False)
                attempts -= 1
                continue
            usage = usage + response.usage
            reply = response.text
            c = parse_classification(reply, request.routes, on_bad_confidence=self.on_bad_confidence)
            if c.status == "ok" or attempts > self.max_format_retries:
                return _result(c, usage=usage, stage="llm", model_calls=attempts, attempts=attempts)
            messages = (*messages, assistant(reply), user(format_error_feedback(c.status, reply, request.routes)))
