"""``HandoffRouter``: the Router preset for tool-call classification, sticky sessions and hand-back.

It has no run logic of its own: it is :class:`~jeeves_router.Router` with

* a :class:`~jeeves_router.classify.toolcall.ToolCallClassifier` on the router agent's
  model (the model must call one ``classify_as_<route>`` tool; its instructions are the
  router agent's instructions and ``router_prompt``);
* ``sticky=True`` and ``hand_back=True`` by default.

So ``HandoffRouter(routes, fallback_route="general")`` is the same as::

    Router(routes, fallback_route="general", sticky=True, hand_back=True,
           classifier=ToolCallClassifier(model, instructions=agent.instructions))
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ...classify.toolcall import ToolCallClassifier
from ...classify.types import Classifier
from ...errors import UsageError
from ...recovery.config import Recovery
from ..handoffs.chain import Detector
from ..handoffs.session import SessionStore
from ..handoffs.tools import HistoryMode, announces_handoff
from ..routes import RouterRoute, check_unit_interval
from .router import Router

if TYPE_CHECKING:
    from pydantic import BaseModel

    from ...actor import Actor

__all__ = ["HandoffRouter"]


class HandoffRouter(Router):
    """A :class:`Router` that classifies by tool call, remembers sessions and takes hand-backs.

    Args:
        routes: The routes (names unique case-insensitively, ``-``/``_``/space alike).
        fallback_route: As for :class:`Router`.
        require_confidence_above: Threshold in [0, 1] on the classify tool's confidence.
        on_missing_confidence: The confidence assumed when the model gives none
            (``None``: a missing confidence fails closed).
        history_turns: How many earlier turns the router model sees (default 0).
        context_schema: As for :class:`Router`.
        router_prompt: Extra instructions for the router model (after the agent's own).
        hand_back: Give every specialist a ``transfer_to_<router>`` tool (default True).
        max_handoffs: As for :class:`Router`.
        max_edge_traversals: As for :class:`Router`.
        history: As for :class:`Router`.
        detect_announced: As for :class:`Router`.
        sticky: As for :class:`Router` (default True).
        session_store: As for :class:`Router`.
        recovery: As for :class:`Router`.
        max_format_retries: Corrections of a router reply without a usable tool call.
    """

    _no_model = (
        "has no model: pass model=... to the Agent "
        "(a HandoffRouter's classify_as_<route> tools are called by the router agent's model)"
    )

    def __init__(
        self,
        routes: Sequence[RouterRoute],
        *,
        fallback_route: str | None = None,
        require_confidence_above: float = 0.0,
        on_missing_confidence: float | None = None,
        history_turns: int = 0,
        context_schema: type[BaseModel] | None = None,
        router_prompt: str | None = None,
        hand_back: bool = True,
        max_handoffs: int = 8,
        max_edge_traversals: int = 2,
        history: HistoryMode = "all",
        detect_announced: Detector | None = announces_handoff,
        sticky: bool = True,
        session_store: SessionStore | None = None,
        recovery: Recovery | None = None,
        max_format_retries: int = 1,
    ) -> None:
        if on_missing_confidence is not None:
            check_unit_interval("on_missing_confidence", on_missing_confidence)
        super().__init__(
            routes,
            fallback_route=fallback_route,
            require_confidence_above=require_confidence_above,
            max_format_retries=max_format_retries,
            history_turns=history_turns,
            recovery=recovery,
            context_schema=context_schema,
            sticky=sticky,
            session_store=session_store,
            hand_back=hand_back,
            max_handoffs=max_handoffs,
            max_edge_traversals=max_edge_traversals,
            history=history,
            detect_announced=detect_announced,
        )
        self.on_missing_confidence = on_missing_confidence
        if router_prompt is not None and not isinstance(router_prompt, str):
            raise UsageError(f"router_prompt must be a string, got {type(router_prompt).__name__}")
        self.router_prompt = router_prompt

    def _agent_classifier(self, agent: Actor) -> Classifier:
        """A tool-call classifier on ``agent``'s model, instructed by the agent (one per agent: ``classifier_for``)."""
        parts = (agent.instructions.strip(), (self.router_prompt or "").strip())
        return ToolCallClassifier(
            agent.resolved_model(),
            instructions="\n\n".join(p for p in parts if p) or None,
            max_format_retries=self.max_format_retries,
            on_missing_confidence=self.on_missing_confidence,
        )
