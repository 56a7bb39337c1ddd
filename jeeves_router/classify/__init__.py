"""Classification: the parser, the LLM and tool-call classifiers, and the decision rule."""

from .llm import LLMClassifier
from .parser import format_classification, normalize_route_name, parse_classification
from .resolve import RouteDecision, resolve_route
from .toolcall import ToolCallClassifier
from .types import Classification, Classifier, ClassifyRequest, ClassifyResult, ParseStatus, RouteSpec

__all__ = [
    "Classification",
    "Classifier",
    "ClassifyRequest",
    "ClassifyResult",
    "LLMClassifier",
    "ParseStatus",
    "RouteDecision",
    "RouteSpec",
    "ToolCallClassifier",
    "format_classification",
    "normalize_route_name",
    "parse_classification",
    "resolve_route",
]
