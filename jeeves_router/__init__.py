r"""jeeves_router: compose specialist agents in code and put a router in front of them.

The top-level namespace holds what an application writes every day: agents and their
architectures, routes, tools and handoffs, results, recovery settings, the errors, and the
test kit's entry points. Everything else is imported from its subpackage:

>>> from jeeves_router import Agent, Router, RouterRoute, tool
>>> from jeeves_router.events import TextDelta, RouterClassified      # typed events
>>> from jeeves_router.journal import JournalRuntime, SQLiteJournal   # durability
>>> from jeeves_router.models import OpenAIModel, ModelRequest        # model adapters
>>> from jeeves_router.classify import LLMClassifier, parse_classification  # classifiers

Each name is imported on first use, so a program pays only for what it touches: ``Agent``
loads the agent and the tool loop, ``Router`` adds the router, and capabilities, handoffs,
the journal and the test kit load when they are first named.

Example:
    A desk that routes each request to one of two specialists. Scripted models stand in for
    the providers here; an application writes ``model="openai:gpt-4.1-nano"`` (or any
    ``"provider:model"``) instead:

    >>> from jeeves_router import Agent, Router, RouterRoute
    >>> from jeeves_router.testing import ScriptedModel
    >>> billing = Agent("You resolve payments.", name="billing", model=ScriptedModel(["Refund issued."]))
    >>> general = Agent("You answer everything else.", name="general", model=ScriptedModel([]))
    >>> desk = Agent(
    ...     "Support desk",
    ...     name="desk",
    ...     model=ScriptedModel(["route: billing\nconfidence: 0.9"]),  # the classifier's reply
    ...     architecture=Router(
    ...         routes=[RouterRoute("billing", billing, "payments, refunds"),
    ...                 RouterRoute("general", general, "anything else")],
    ...         fallback_route="general",
    ...         require_confidence_above=0.6,
    ...     ),
    ... )
    >>> result = desk.run_sync("I was charged twice")
    >>> result.status, result.route, result.confidence, result.output
    ('ok', 'billing', 0.9, 'Refund issued.')
    >>> result.usage.requests  # the classifier call and the specialist's
    2
"""

from typing import TYPE_CHECKING

from ._lazy import lazy_exports

if TYPE_CHECKING:  # imported on first use (see _EVERYDAY below); spelled out for type checkers
    from .agent import Agent, RunStream
    from .architectures.capabilities import (
        Capabilities,
        Capability,
        CapabilityCall,
        CapabilityOutput,
        ClassifierExample,
        ClassifierGuide,
    )
    from .architectures.handoffs import HandoffChain
    from .architectures.react import ToolLoop
    from .architectures.router import HandoffRouter, Router, RouterRoute
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
    from .messages import Message
    from .policies import RetryPolicy
    from .recovery import ErrorClassification, ErrorContext, ErrorSeverity, ExecutionError, Recovery
    from .results import RunResult, RunStatus
    from .testing import FunctionModel, ScriptedModel, StaticClassifier, block_real_model_calls, capture_events
    from .tools import ContextUpdate, Handoff, Tool, ToolContext, tool
    from .usage import Usage

__version__ = "0.1.0"

#: The public names (``__all__``) and where they live. Each is imported on first use, so
#: ``import jeeves_router`` is cheap and ``from jeeves_router import Agent`` loads the agent,
#: the tool loop and what they need, not capabilities, handoffs, recovery or the journal.
_EVERYDAY = {
    "jeeves_router.agent": ("Agent", "RunStream"),
    "jeeves_router.architectures.capabilities": (
        "Capabilities",
        "Capability",
        "CapabilityCall",
        "CapabilityOutput",
        "ClassifierExample",
        "ClassifierGuide",
    ),
    "jeeves_router.architectures.handoffs": ("HandoffChain",),
    "jeeves_router.architectures.react": ("ToolLoop",),
    "jeeves_router.architectures.router": ("HandoffRouter", "Router", "RouterRoute"),
    "jeeves_router.errors": (
        "JeevesError",
        "ModelError",
        "RealModelCallBlocked",
        "ReplayDivergence",
        "RunError",
        "ScriptExhausted",
        "StreamInterrupted",
        "ToolError",
        "UsageError",
    ),
    "jeeves_router.messages": ("Message",),
    "jeeves_router.policies": ("RetryPolicy",),
    "jeeves_router.recovery": ("ErrorClassification", "ErrorContext", "ErrorSeverity", "ExecutionError", "Recovery"),
    "jeeves_router.results": ("RunResult", "RunStatus"),
    "jeeves_router.tools": ("ContextUpdate", "Handoff", "Tool", "ToolContext", "tool"),
    "jeeves_router.usage": ("Usage",),
}

#: The test kit, imported on first use (library code never imports it).
_TESTING = ("ScriptedModel", "FunctionModel", "StaticClassifier", "capture_events", "block_real_model_calls")

#: Names that moved to their subpackages in 0.2. They still resolve here, lazily, so code
#: written for 0.1 keeps working for now; they are not part of ``__all__`` and the docs
#: import them from the subpackage named here.
_MOVED = {
    "jeeves_router.events": (
        "Event",
        "event_adapter",
        "RunStarted",
        "RunCompleted",
        "RunFailed",
        "TextDelta",
        "ToolCalled",
        "ToolResult",
        "RouterClassified",
        "RouterDispatched",
        "RouterFallback",
        "RouterUnresolved",
        "RouterCompleted",
        "HandoffRequested",
        "HandoffCompleted",
        "HandoffRejected",
        "RecoveryRetry",
        "RecoveryReclassify",
        "RecoveryReplan",
        "RecoveryReport",
        "CapabilitiesSelected",
        "CapabilityStarted",
        "CapabilityCompleted",
    ),
    "jeeves_router.journal": (
        "JournalRuntime",
        "SQLiteJournal",
        "MemoryJournal",
        "JournalError",
        "JournalCorrupt",
        "ToolOutcomeUnknown",
        "current_idempotency_key",
    ),
    "jeeves_router.models": ("Model", "ModelRequest", "ModelResponse", "ModelTextDelta", "resolve_model"),
    "jeeves_router.models.openai": ("OpenAIModel",),
    "jeeves_router.models.anthropic": ("AnthropicModel",),
    "jeeves_router.models.llamacpp": ("LlamaCppModel", "smollm2_path"),
    "jeeves_router.models.prices": ("Price", "set_price"),
    "jeeves_router.classify": (
        "Classification",
        "Classifier",
        "ClassifyRequest",
        "ClassifyResult",
        "LLMClassifier",
        "RouteSpec",
        "format_classification",
        "parse_classification",
        "resolve_route",
    ),
    "jeeves_router.classify.cascade": ("CascadeClassifier", "CascadeStats"),
    "jeeves_router.classify.constrained": ("classification_format", "classification_schema", "few_shot_turns"),
    "jeeves_router.classify.embedding": ("EmbeddingClassifier",),
    "jeeves_router.ids": ("child_session_id", "split_child_session_id"),
    "jeeves_router.policies": ("DEFAULT_RETRY", "FRAMEWORK_RETRY"),
    "jeeves_router.messages": ("TextPart", "ToolCallPart", "ToolResultPart"),
    "jeeves_router.runtime": ("Runtime",),
    "jeeves_router.architectures.base": ("Architecture", "RunContext"),
    "jeeves_router.architectures.handoffs": ("InMemorySessionStore", "SessionStore", "HandoffInput", "HistoryMode"),
}
__getattr__, __dir__ = lazy_exports(__name__, _EVERYDAY, _MOVED, {"jeeves_router.testing": _TESTING})


__all__ = [
    "Agent",
    "Capabilities",
    "Capability",
    "CapabilityCall",
    "CapabilityOutput",
    "ClassifierExample",
    "ClassifierGuide",
    "ContextUpdate",
    "ErrorClassification",
    "ErrorContext",
    "ErrorSeverity",
    "ExecutionError",
    "FunctionModel",
    "Handoff",
    "HandoffChain",
    "HandoffRouter",
    "JeevesError",
    "Message",
    "ModelError",
    "RealModelCallBlocked",
    "Recovery",
    "ReplayDivergence",
    "RetryPolicy",
    "Router",
    "RouterRoute",
    "RunError",
    "RunResult",
    "RunStatus",
    "RunStream",
    "ScriptExhausted",
    "ScriptedModel",
    "StaticClassifier",
    "StreamInterrupted",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolLoop",
    "Usage",
    "UsageError",
    "block_real_model_calls",
    "capture_events",
    "tool",
]
