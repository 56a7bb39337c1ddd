"""The LLM classifier: one model call answering ``route:`` / ``confidence:``."""

from __future__ import annotations

from ..errors import UsageError
from ..messages import Message, TextPart, assistant, text_of, user
from ..models.base import Model, ModelRequest
from ..models.registry import resolve_model
from ..usage import Usage
from .parser import parse_classification
from .prompt import DEFAULT_CLASSIFIER_PROMPT, format_error_feedback, render_prompt, validate_prompt_template
from .types import ClassifyRequest, ClassifyResult, RouteSpec

__all__ = ["LLMClassifier"]


class LLMClassifier:
    """Asks a model to name a route, reads the reply with :func:`parse_classification`.

    The system prompt is static for a given route table (so providers can cache it); the
    request, the recent history, hints and feedback go in the user message. Calls use
    temperature 0 and a small output cap. A malformed reply is retried
    ``max_format_retries`` times with the format error shown to the model.

    Args:
        model: The model, or a ``"provider:model"`` string resolved at first use.
        prompt: A template with ``{routes}`` / ``{route_names}`` placeholders.
        max_format_retries: Extra attempts after a malformed reply (default 1).
        max_tokens: Output cap per call.
        on_bad_confidence: The parser's policy for a missing or invalid confidence
            (``None``: fail closed).
    """

    def __init__(
        self,
        model: Model | str,
        *,
        prompt: str | None = None,
        max_format_retries: int = 1,
        max_tokens: int = 64,
        on_bad_confidence: float | None = None,
    ) -> None:
        if max_format_retries < 0:
            raise UsageError(f"max_format_retries must be >= 0, got {max_format_retries}")
        if on_bad_confidence is not None and not 0.0 <= on_bad_confidence <= 1.0:
            raise UsageError(f"on_bad_confidence must be None or within [0, 1], got {on_bad_confidence}")
        self.model = model
        self._model: Model | None = None if isinstance(model, str) else resolve_model(model)
        self.prompt = validate_prompt_template(prompt) if prompt is not None else DEFAULT_CLASSIFIER_PROMPT
        self.max_format_retries = max_format_retries
        self.max_tokens = max_tokens
        self.on_bad_confidence = on_bad_confidence
        self._rendered: dict[tuple[RouteSpec, ...], str] = {}

    def system_prompt(self, routes: tuple[RouteSpec, ...]) -> str:
        """The rendered system prompt for ``routes`` (cached)."""
        text = self._rendered.get(routes)
        if text is None:
            text = self._rendered[routes] = render_prompt(self.prompt, routes)
        return text

    @staticmethod
    def user_message(request: ClassifyRequest) -> Message:
        """The user turn: history, hints and feedback around the request text."""
        if not request.history and not request.hints and not request.feedback and not request.context:
            return Message("user", (TextPart(request.text),))
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
        system = self.system_prompt(request.routes)
        messages: list[Message] = [self.user_message(request)]
        usage = Usage()
        attempts = 0
        while True:
            attempts += 1
            response = await model.request(
                ModelRequest(
                    messages=tuple(messages),
                    system=system,
                    temperature=0.0,
                    max_tokens=self.max_tokens,
                    purpose="classify",
                )
            )
            usage = usage + response.usage
            reply = response.text
            c = parse_classification(reply, request.routes, on_bad_confidence=self.on_bad_confidence)
            if c.ok or attempts > self.max_format_retries:
                return ClassifyResult(c, usage=usage, stage="llm", model_calls=attempts, attempts=attempts)
            messages.append(assistant(reply))
            messages.append(user(format_error_feedback(c.status, reply, request.routes)))
