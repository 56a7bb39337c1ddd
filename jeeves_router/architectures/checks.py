"""Agent options an architecture refuses because it would never use them.

An architecture that does not run the agent's own tool loop — a
:class:`~jeeves_router.Router` (its agent only classifies and dispatches),
:class:`~jeeves_router.Capabilities` (its agent only selects, plans and runs capabilities)
— never calls the agent's ``tools=`` and never offers its ``handoffs=``. Accepting them
would silently ignore them, so such an architecture refuses them in its ``validate``,
with a message that names the option and where it belongs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import UsageError

if TYPE_CHECKING:
    from ..actor import Actor

__all__ = ["check_unused_agent_options"]


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
