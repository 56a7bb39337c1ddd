"""jeeves_router: compose specialist agents in code and put a router in front of them.

Example:
    >>> from jeeves_router import Agent, Router, RouterRoute
    >>> desk = Agent("Support desk", name="desk", model="openai:gpt-4.1-nano",
    ...              architecture=Router(routes=[...], fallback_route="general"))
"""

from .agent import Agent, RunStream
from .architectures import Architecture, Router, RouterRoute, RunContext, ToolLoop
from .architectures.capabilities import (
    Capabilities,
    Capability,
    CapabilityCall,
    CapabilityOutput,
    ClassifierExample,
    ClassifierGuide,
)
from .architectures.handoff import HandoffRouter
from .architectures.handoff_chain import HandoffChain
from .architectures.handoff_session import InMemorySessionStore, SessionStore
from .architectures.handoff_tools import HandoffInput, HistoryMode
from .classify import (
    Classification,
    Classifier,
    ClassifyRequest,
    ClassifyResult,
    LLMClassifier,
    RouteSpec,
    format_classification,
    parse_classification,
    resolve_route,
)
from .classify.cascade import CascadeClassifier, CascadeStats
from .classify.constrained import classification_format, classification_schema, few_shot_turns
from .errors import (
    JeevesError,
    ModelError,
    RealModelCallBlocked,
    ReplayDivergence,
    RunError,
    ScriptExhausted,
    StreamInterrupted,
    ToolError,
    UsageError,
)
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
    RouterCompleted,
    RouterDispatched,
    RouterFallback,
    RouterUnresolved,
    RunCompleted,
    RunFailed,
    RunStarted,
    TextDelta,
    ToolCalled,
    ToolResult,
    event_adapter,
)
from .ids import child_session_id, split_child_session_id
from .journal import (
    JournalCorrupt,
    JournalError,
    JournalRuntime,
    MemoryJournal,
    SQLiteJournal,
    ToolOutcomeUnknown,
    current_idempotency_key,
)
from .messages import Message, TextPart, ToolCallPart, ToolResultPart
from .models import Model, ModelRequest, ModelResponse, ModelTextDelta, resolve_model
from .models.anthropic import AnthropicModel
from .models.llamacpp import LlamaCppModel, smollm2_path
from .models.openai import OpenAIModel
from .models.prices import Price, set_price
from .policies import DEFAULT_RETRY, FRAMEWORK_RETRY, RetryPolicy
from .recovery import ErrorClassification, ErrorContext, ErrorSeverity, ExecutionError, Recovery
from .results import RunResult, RunStatus
from .runtime import Runtime
from .tools import ContextUpdate, Handoff, Tool, ToolContext, tool
from .usage import Usage

__version__ = "0.1.0"

_LAZY = {
    "EmbeddingClassifier": "jeeves_router.classify.embedding",
}


def __getattr__(name: str) -> object:
    """Names whose modules need an optional extra are imported on first use.

    They are left out of ``__all__``, so ``from jeeves_router import *`` works without the extra.
    """
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'jeeves_router' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = [
    "LlamaCppModel",
    "smollm2_path",
    "classification_format",
    "classification_schema",
    "few_shot_turns",
    "CascadeClassifier",
    "CascadeStats",
    "JournalRuntime",
    "SQLiteJournal",
    "MemoryJournal",
    "JournalError",
    "JournalCorrupt",
    "ToolOutcomeUnknown",
    "current_idempotency_key",
    "Capabilities",
    "Capability",
    "CapabilityCall",
    "CapabilityOutput",
    "ClassifierExample",
    "ClassifierGuide",
    "CapabilitiesSelected",
    "CapabilityCompleted",
    "CapabilityStarted",
    "RecoveryReclassify",
    "RecoveryReplan",
    "RecoveryReport",
    "RecoveryRetry",
    "DEFAULT_RETRY",
    "FRAMEWORK_RETRY",
    "ErrorClassification",
    "ErrorContext",
    "ErrorSeverity",
    "ExecutionError",
    "Recovery",
    "HandoffChain",
    "HandoffCompleted",
    "HandoffInput",
    "HandoffRejected",
    "HandoffRequested",
    "HandoffRouter",
    "HistoryMode",
    "InMemorySessionStore",
    "SessionStore",
    "event_adapter",
    "Agent",
    "AnthropicModel",
    "OpenAIModel",
    "Price",
    "set_price",
    "Architecture",
    "Classification",
    "Classifier",
    "ClassifyRequest",
    "ClassifyResult",
    "ContextUpdate",
    "Event",
    "Handoff",
    "JeevesError",
    "LLMClassifier",
    "Message",
    "Model",
    "ModelError",
    "ModelRequest",
    "ModelResponse",
    "ModelTextDelta",
    "RealModelCallBlocked",
    "ReplayDivergence",
    "RetryPolicy",
    "RouteSpec",
    "Router",
    "RouterClassified",
    "RouterCompleted",
    "RouterDispatched",
    "RouterFallback",
    "RouterRoute",
    "RouterUnresolved",
    "RunCompleted",
    "RunContext",
    "RunError",
    "RunFailed",
    "RunResult",
    "RunStarted",
    "RunStatus",
    "RunStream",
    "Runtime",
    "ScriptExhausted",
    "StreamInterrupted",
    "TextDelta",
    "TextPart",
    "Tool",
    "ToolCallPart",
    "ToolCalled",
    "ToolContext",
    "ToolError",
    "ToolLoop",
    "ToolResult",
    "ToolResultPart",
    "Usage",
    "UsageError",
    "child_session_id",
    "format_classification",
    "parse_classification",
    "resolve_model",
    "resolve_route",
    "split_child_session_id",
    "tool",
]
