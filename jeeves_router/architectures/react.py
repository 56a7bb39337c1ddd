"""The default architecture: a tool loop.

model -> tool calls -> results -> model ... until the model answers with text and no tool
call, bounded by the agent's ``max_turns`` (the run then ends with status ``max_turns``).
Tool failures, unknown tools and malformed arguments go back to the model as error
results. A tool that returns a :class:`~jeeves_router.tools.Handoff` ends the turn at once:
later calls of the same turn are answered "ignored", no further model call is made, and
``ctx.handoff`` tells the enclosing architecture where to go.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from .._aio import aclosing
from ..errors import ModelError
from ..events import Event, TextDelta, ToolCalled, ToolResult
from ..messages import Message, TextPart, ToolCallPart, ToolResultPart
from ..models.base import ModelRequest, ModelResponse, ModelTextDelta
from ..results import RunResult
from ..tools import ToolOutcome
from ..usage import Usage
from .base import RunContext

if TYPE_CHECKING:
    from ..agent import Agent

__all__ = ["ToolLoop"]


class ToolLoop:
    """Model and tools in a loop until a text answer (the default architecture)."""

    def validate(self, agent: Agent) -> None:
        """Nothing to check beyond what Agent checks."""

    async def run(self, agent: Agent, ctx: RunContext) -> AsyncIterator[Event]:
        """Run the loop, yielding text deltas and tool events."""
        model = agent.resolved_model()
        tools = agent.tool_map
        specs = tuple(t.spec for t in tools.values())
        new_messages: list[Message] = [Message("user", (TextPart(ctx.prompt),))]
        messages: list[Message] = [*ctx.history, *new_messages]
        usage = Usage()
        sid, path = ctx.session_id, ctx.path
        for _turn in range(agent.max_turns):
            request = ModelRequest(
                messages=tuple(messages),
                system=agent.instructions,
                tools=specs,
                temperature=agent.temperature,
                max_tokens=agent.max_tokens,
            )
            response: ModelResponse | None = None
            async with aclosing(ctx.model_stream(model, request)) as stream:
                async for item in stream:
                    if isinstance(item, ModelTextDelta):
                        if item.text:
                            yield TextDelta(session_id=sid, path=path, text=item.text)
                    else:
                        response = item
            if response is None:
                raise ModelError(f"model {model.name} ended its stream without a response", path=path)
            usage = usage + response.usage
            reply = response.as_message()
            messages.append(reply)
            new_messages.append(reply)
            calls = response.tool_calls
            if not calls:
                ctx.result = RunResult(
                    output=response.text,
                    status="ok",
                    session_id=sid,
                    path=path,
                    usage=usage,
                    usage_by_route={},
                    messages=tuple(new_messages),
                )
                return
            results: list[ToolResultPart] = []
            for call in calls:
                if ctx.handoff is not None:
                    outcome = ToolOutcome(
                        f"ignored: this turn already handed off to {ctx.handoff.target}", is_error=True
                    )
                else:
                    yield ToolCalled(
                        session_id=sid, path=path, call_id=call.id, tool=call.name, arguments=call.arguments
                    )
                    outcome = await self._call(agent, ctx, call)
                    if outcome.handoff is not None:
                        ctx.handoff = outcome.handoff
                    if outcome.context_update:
                        ctx.context = {**ctx.context, **outcome.context_update}
                yield ToolResult(
                    session_id=sid,
                    path=path,
                    call_id=call.id,
                    tool=call.name,
                    content=outcome.content,
                    is_error=outcome.is_error,
                )
                results.append(ToolResultPart(call.id, call.name, outcome.content, outcome.is_error))
            tool_msg = Message("tool", tuple(results))
            messages.append(tool_msg)
            new_messages.append(tool_msg)
            if ctx.handoff is not None:
                ctx.result = RunResult(
                    output=None,
                    status="ok",
                    session_id=sid,
                    path=path,
                    usage=usage,
                    messages=tuple(new_messages),
                    metadata={"handoff": ctx.handoff.target},
                )
                return
        ctx.result = RunResult(
            output=None,
            status="max_turns",
            session_id=sid,
            path=path,
            usage=usage,
            messages=tuple(new_messages),
            metadata={"max_turns": agent.max_turns},
        )

    @staticmethod
    async def _call(agent: Agent, ctx: RunContext, call: ToolCallPart) -> ToolOutcome:
        if call.argument_error is not None:
            return ToolOutcome(
                f"the arguments of {call.name} were not a valid JSON object ({call.argument_error}); "
                "call the tool again with a JSON object",
                is_error=True,
            )
        tool = agent.tool_map.get(call.name)
        if tool is None:
            known = ", ".join(agent.tool_map) or "none"
            return ToolOutcome(f"unknown tool {call.name!r}; available tools: {known}", is_error=True)
        return await ctx.call_tool(tool, call)
