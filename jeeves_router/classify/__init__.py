"""Classification: the parser, the LLM and tool-call classifiers, and the decision rule.

The protocol and result types (:mod:`.types`) are what the architectures need to import;
each classifier and helper here is imported on first use.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .llm import LLMClassifier
    from .parser import format_classification, normalize_route_name, parse_classification
    from .resolve import RouteDecision, resolve_route
    from .toolcall import ToolCallClassifier
    from .types import Classification, Classifier, ClassifyRequest, ClassifyResult, ParseStatus, RouteSpec

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        ".llm": ("LLMClassifier",),
        ".parser": ("format_classification", "normalize_route_name", "parse_classification"),
        ".resolve": ("RouteDecision", "resolve_route"),
        ".toolcall": ("ToolCallClassifier",),
        ".types": ("Classification", "Classifier", "ClassifyRequest", "ClassifyResult", "ParseStatus", "RouteSpec"),
    },
)

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
