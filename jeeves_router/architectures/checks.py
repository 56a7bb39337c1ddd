"""Agent options an architecture refuses because it would never use them.

An architecture that does not run the agent's own tool loop — a
:class:`~jeeves_router.Router` (its agent only classifies and dispatches),
:class:`~jeeves_router.Capabilities` (its agent only selects, plans and runs capabilities)
— never calls the agent's ``tools=`` and never offers its ``handoffs=``. Accepting them
would silently ignore them, so such an architecture refuses them in its ``validate``,
with a message that names the option and where it belongs.

The same holds for what a run is asked (:func:`check_run_request`, from an architecture's
``prepare``): a ``force_route`` given to an agent without routes, or an ``options`` key its
architecture never reads (a typo such as ``"reset_stcky"``), would be ignored silently.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from ..errors import UsageError

if TYPE_CHECKING:
    from ..actor import Actor
    from .base import RunContext

__all__ = ["check_run_request", "check_unused_agent_options"]

#: A run option every architecture takes: the options of the child runs it starts.
_CHILD_OPTIONS = "child_options"


def check_unused_agent_options(agent: Actor, *, role: str, tools_instead: str, handoffs_instead: str) -> None:
    """Refuse ``tools=`` (toolsets too) and ``handoffs=`` on an agent whose architecture never uses them.

    Args:
        agent: The agent that holds the architecture.
        role: What the agent is called in the message (``"router agent"``).
        tools_instead: Why the tools are never called and where they belong instead.
        handoffs_instead: Why the handoffs are never used and what to do with their targets instead.

    Raises:
        UsageError: naming the option and what to do instead.
    """
    tools = [t.name for t in getattr(agent, "tools", ())] + [repr(t) for t in getattr(agent, "toolsets", ())]
    if tools:
        raise UsageError(
            f"{role} {agent.name!r} has tools= ({', '.join(tools)}), which it would never call: {tools_instead}"
        )
    handoffs = [h if isinstance(h, str) else getattr(h, "name", "?") for h in getattr(agent, "handoffs", ())]
    if handoffs:
        raise UsageError(
            f"{role} {agent.name!r} has handoffs= ({', '.join(handoffs)}), which it would never use: {handoffs_instead}"
        )


def check_run_request(
    agent: Actor, ctx: RunContext, *, options: Collection[str] = (), no_routes: str | None = None
) -> None:
    """Refuse a ``force_route`` or a per-run option ``agent``'s architecture would ignore.

    Args:
        agent: The agent about to run.
        ctx: Its run's context (``force_route``, ``options``).
        options: The ``options`` keys the architecture reads.
        no_routes: For an architecture without routes, what it does instead (``force_route``
            is then refused with it); ``None`` for a router.

    Raises:
        UsageError: naming the request, the agent, and what it takes instead.
    """
    kind = type(agent.architecture).__name__
    if no_routes is not None and ctx.force_route is not None:
        raise UsageError(f"force_route is for routers; agent {agent.name!r} runs {no_routes}", argument="force_route")
    for key in ctx.options:
        if key not in options and key != _CHILD_OPTIONS:
            takes = f"it takes: {', '.join(repr(k) for k in options)}" if options else "it takes none"
            raise UsageError(f"agent {agent.name!r} ({kind}) has no run option {key!r}; {takes}", argument="options")
