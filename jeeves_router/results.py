"""The result of a run."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from types import MappingProxyType
from typing import Annotated, Any, Literal, TypeAlias

from ._frozen import frozen
from .messages import Message
from .usage import NO_USAGE, Usage

__all__ = ["RunResult", "RunStatus", "FallbackReason", "METADATA_TUPLES", "RunMetadata"]

#: ``ok`` — answered by the chosen agent; ``fallback`` — answered by the fallback route;
#: ``unresolved`` — no route could be chosen and there is no fallback (``output`` is None);
#: ``failed`` — the run raised (only seen on stream results; ``run()`` re-raises);
#: ``max_turns`` — the tool loop hit its bound; ``handoff_limit`` / ``handoff_cycle`` —
#: a handoff chain was stopped; ``critical`` — recovery stopped the run with a report;
#: ``fatal`` — recovery aborted the run.
RunStatus = Literal[
    "ok",
    "fallback",
    "unresolved",
    "failed",
    "max_turns",
    "handoff_limit",
    "handoff_cycle",
    "critical",
    "fatal",
]

#: Why the Router used its fallback route (or ended unresolved).
FallbackReason = Literal[
    "low_confidence",
    "unknown_route",
    "missing_route",
    "ambiguous_route",
    "missing_confidence",
    "invalid_confidence",
    "empty_reply",
    "excluded_route",
    "classifier_error",
    "no_handoff",
]


#: The :attr:`RunResult.metadata` keys the built-in architectures write whose values are
#: tuples, with their types. Declared to pydantic, so a result validated back from JSON (an
#: ``event_adapter()`` round trip, a journal or a served stream read back) has them as tuples
#: again and equals the result it was dumped from. Any other key holds JSON values: a tuple an
#: architecture of your own puts there comes back as a list.
METADATA_TUPLES: Mapping[str, Any] = MappingProxyType(
    {
        "handoffs": tuple[dict[str, Any], ...],  # handoff chains and Routers: each accepted handoff
        "agents": tuple[str, ...],  # the agents the run visited, in order
        "excluded_routes": tuple[str, ...],  # a Router's routes left out by reclassification
        "capabilities": tuple[str, ...],  # Capabilities: the selected ones
        "excluded": tuple[str, ...],
        "plan": tuple[tuple[str, str], ...],  # (capability, task) per step
        "steps": tuple[str, ...],  # the capabilities whose steps completed
    }
)


class _MetadataSchema:
    """How pydantic reads :attr:`RunResult.metadata`: :data:`METADATA_TUPLES` by their types, the rest as they are.

    A declared key whose value does not fit its type (an architecture of your own using the
    name) is kept as it is rather than refused. pydantic is imported only when it asks.
    """

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema as cs

        fields = {
            key: cs.typed_dict_field(
                cs.union_schema([handler.generate_schema(kind), cs.any_schema()], mode="left_to_right"),
                required=False,
            )
            for key, kind in METADATA_TUPLES.items()
        }
        return cs.typed_dict_schema(fields, extra_behavior="allow", total=False)


#: The type of :attr:`RunResult.metadata`: a mapping of names to values (see :data:`METADATA_TUPLES`).
RunMetadata: TypeAlias = Annotated[Mapping[str, Any], _MetadataSchema()]


@frozen(kw_only=True)
class RunResult:
    """What :meth:`Agent.run` returns.

    Attributes:
        output: The final answer text: the last model reply of the agent that answered
            (``route``); ``None`` when the run ended without one (``unresolved``,
            ``max_turns``, handoff limits, ``critical``). Like openai-agents' ``final_output``,
            it is not everything the run said: :meth:`~jeeves_router.Agent.stream` also sends, as
            ``text.delta`` events, the text of an agent that then handed the turn on and the
            text a tool loop wrote before a tool call. The served chat reply says all of it,
            streamed or whole (:class:`jeeves_router.reply.ReplyText`).
        status: See :data:`RunStatus`.
        session_id: The session id this agent ran under.
        path: Route path of this agent, e.g. ``("desk",)``.
        route: The route that answered, for routed runs; when its specialist handed the
            turn on, the agent that answered (``metadata["handoffs"]`` has the chain).
        confidence: The classifier's confidence for the route the router dispatched to
            (after a handoff, that route's, not a score of the agent ``route`` names;
            ``None`` on a sticky turn, which is not classified).
        used_fallback: True when the fallback route answered.
        fallback_reason: Why the fallback (or unresolved) happened.
        specialist_session_id: The session id the specialist ran under.
        usage: Usage summed over classifier calls, retries and the specialist (every
            model request sent counts, failed ones included), and the agent runs its tools
            returned (an agent as a tool: counted as the calling agent's, under its key in
            ``usage_by_route``).
        usage_by_route: Usage per agent of the run, under the name :attr:`route` gives it:
            a route's name for the agent the router dispatched to, an agent's own name for
            one reached by a handoff or a sticky turn (not a declared route), so
            ``usage_by_route[route]`` is what the agent that answered used; the agent that
            handed off keeps its own. The classifier's usage is under ``"<classifier>"``
            (absent on a sticky turn, which is not classified), a recovery report's
            explanation under ``"<explanation>"``. A Capabilities run: per capability, its
            selection under ``"<classifier>"``, its planning under ``"<orchestrator>"``.
        messages: The messages this run added to the conversation.
        report: A recovery report (a JSON-ready mapping) when recovery stopped the run.
        metadata: Architecture-specific extras (e.g. the handoff chain); the built-in
            architectures' tuples are listed in :data:`METADATA_TUPLES` (they stay tuples
            through JSON), any other value is a JSON value.
    """

    output: str | None
    status: RunStatus
    session_id: str
    path: tuple[str, ...] = ()
    route: str | None = None
    confidence: float | None = None
    used_fallback: bool = False
    fallback_reason: FallbackReason | None = None
    specialist_session_id: str | None = None
    usage: Usage = NO_USAGE
    usage_by_route: Mapping[str, Usage] = field(default_factory=dict)
    messages: tuple[Message, ...] = ()
    report: Mapping[str, Any] | None = None
    metadata: RunMetadata = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when the run produced an answer (directly or through the fallback)."""
        return self.status in ("ok", "fallback")

    @property
    def user_message(self) -> str | None:
        """The message for the end user of a run that recovery stopped (``critical``, ``fatal``).

        It is the recovery report's ``user_message`` (the ``classify_error`` hook's, else a
        generic sentence naming no internals), the one part of a report meant to be shown.
        ``None`` when the run has no report. The OpenAI-compatible server and the MCP server
        answer with it where a run has no :attr:`output`.
        """
        message = None if self.report is None else self.report.get("user_message")
        return message if isinstance(message, str) and message else None
