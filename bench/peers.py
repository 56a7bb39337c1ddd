"""Peer frameworks doing one routed request on fake models, for ``bench/overhead.py``.

Each peer does the same job once: one classification step on a fake model, dispatch to a
specialist (billing / technical / general), and the specialist's answer streamed in
``len(ANSWER_CHUNKS)`` chunks that the caller consumes as they arrive. Each function returns the
final output text, which must equal ``ANSWER``.

* ``openai_agents_routed``: a triage ``Agent`` whose fake model answers with the handoff tool call
  ``transfer_to_billing``; the billing agent's fake model streams the answer. Run with
  ``Runner.run_streamed`` (tracing off), the caller iterates ``stream_events()``.
* ``langgraph_routed``: a ``StateGraph`` whose classifier node calls a fake classifier, parses its
  ``route:`` / ``confidence:`` lines and returns ``Command(goto=route)``; the specialist node
  forwards the fake model's chunks with the stream writer. No checkpointer; the caller iterates
  ``graph.astream(stream_mode=["custom", "updates"])``.
* ``pydantic_ai_routed``: a router ``Agent`` on a ``FunctionModel`` whose output functions (one
  per specialist) hand off to the specialist agent; the specialist runs with ``run_stream`` on a
  streaming ``FunctionModel`` and each text delta goes to the caller's callback as it arrives
  (``debounce_by=None``: the default 0.1 s debounce would merge the five chunks into one).

Graphs, agents and the fakes' canned provider events are built once at import time; only the
request is timed. Peers are installed from ``bench/requirements.txt`` and never imported by
``jeeves_router``.

Run ``python bench/peers.py`` to print the three medians.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

from agents import Agent as OAAgent
from agents import RunConfig, Runner, set_tracing_disabled
from agents.models.interface import Model as OAModel
from agents.models.interface import ModelTracing
from harness import ANSWER, ANSWER_CHUNKS, CLASSIFIER_REPLY, ROUTES, Routed, measure_all
from langgraph.config import get_stream_writer
from langgraph.graph import START, StateGraph
from langgraph.types import Command
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseContentPartAddedEvent,
    ResponseCreatedEvent,
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseFunctionToolCall,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseTextDeltaEvent,
    ResponseTextDoneEvent,
)
from pydantic_ai import Agent as PAAgent
from pydantic_ai import RunContext
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolCallPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel


def _check(chunks: list[str], output: str) -> str:
    """Fail loudly unless the caller got the answer chunk by chunk and as the final output."""
    if len(chunks) != len(ANSWER_CHUNKS) or "".join(chunks) != output or output != ANSWER:
        raise AssertionError(f"peer returned {output!r} after streaming {chunks!r}")
    return output


# --------------------------------------------------------------------------- openai-agents


set_tracing_disabled(True)
_OA_RUN_CONFIG = RunConfig(tracing_disabled=True)


def _oa_response(output: list[Any], status: Literal["in_progress", "completed"]) -> Response:
    return Response(
        id="resp_fake",
        created_at=0,
        model="fake",
        object="response",
        output=output,
        tool_choice="auto",
        tools=[],
        parallel_tool_calls=False,
        status=status,
    )


def _oa_handoff_events(tool_name: str) -> list[Any]:
    """Provider events of a response that is one function call: the handoff."""
    call = ResponseFunctionToolCall(id="fc_1", call_id="call_1", type="function_call", name=tool_name, arguments="{}")
    return [
        ResponseCreatedEvent(type="response.created", response=_oa_response([], "in_progress"), sequence_number=0),
        ResponseOutputItemAddedEvent(type="response.output_item.added", item=call, output_index=0, sequence_number=1),
        ResponseFunctionCallArgumentsDeltaEvent(
            type="response.function_call_arguments.delta",
            item_id="fc_1",
            output_index=0,
            delta="{}",
            sequence_number=2,
        ),
        ResponseOutputItemDoneEvent(type="response.output_item.done", item=call, output_index=0, sequence_number=3),
        ResponseCompletedEvent(
            type="response.completed",
            response=_oa_response([call], "completed"),
            sequence_number=4,
        ),
    ]


def _oa_text_events(chunks: tuple[str, ...]) -> list[Any]:
    """Provider events of a response that is one assistant message streamed in ``chunks``."""
    text = "".join(chunks)

    def message(body: str, status: Literal["in_progress", "completed"]) -> ResponseOutputMessage:
        part = ResponseOutputText(type="output_text", text=body, annotations=[])
        return ResponseOutputMessage(
            id="msg_1",
            type="message",
            role="assistant",
            status=status,
            content=[part],
        )

    events: list[Any] = [
        ResponseCreatedEvent(type="response.created", response=_oa_response([], "in_progress"), sequence_number=0),
        ResponseOutputItemAddedEvent(
            type="response.output_item.added",
            item=message("", "in_progress"),
            output_index=0,
            sequence_number=1,
        ),
        ResponseContentPartAddedEvent(
            type="response.content_part.added",
            item_id="msg_1",
            output_index=0,
            content_index=0,
            part=ResponseOutputText(type="output_text", text="", annotations=[]),
            sequence_number=2,
        ),
    ]
    for chunk in chunks:
        events.append(
            ResponseTextDeltaEvent(
                type="response.output_text.delta",
                item_id="msg_1",
                output_index=0,
                content_index=0,
                delta=chunk,
                logprobs=[],
                sequence_number=len(events),
            )
        )
    done = message(text, "completed")
    events += [
        ResponseTextDoneEvent(
            type="response.output_text.done",
            item_id="msg_1",
            output_index=0,
            content_index=0,
            text=text,
            logprobs=[],
            sequence_number=len(events),
        ),
        ResponseOutputItemDoneEvent(
            type="response.output_item.done",
            item=done,
            output_index=0,
            sequence_number=len(events) + 1,
        ),
        ResponseCompletedEvent(
            type="response.completed",
            response=_oa_response([done], "completed"),
            sequence_number=len(events) + 2,
        ),
    ]
    return events


class _OAFakeModel(OAModel):
    """A fake Agents SDK model that replays one canned provider event stream per call.

    The events are built once (as a provider client would build them from the wire); the
    triage model checks that the handoff it returns is one the agent offered.
    """

    def __init__(self, events: list[Any], handoff: str | None = None) -> None:
        self._events = events
        self._handoff = handoff

    def _check_handoff(self, handoffs: list[Any]) -> None:
        if self._handoff is not None and self._handoff not in {h.tool_name for h in handoffs}:
            raise AssertionError(f"{self._handoff} is not among the offered handoffs")

    async def get_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the benchmark only runs streamed")

    async def stream_response(
        self,
        system_instructions: str | None,
        input: Any,
        model_settings: Any,
        tools: list[Any],
        output_schema: Any,
        handoffs: list[Any],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None = None,
        conversation_id: str | None = None,
        prompt: Any = None,
    ) -> AsyncIterator[Any]:
        self._check_handoff(handoffs)
        for event in self._events:
            yield event


def _build_openai_agents() -> OAAgent[Any]:
    specialists = [
        OAAgent(
            name=route,
            instructions=f"You answer {route} questions.",
            handoff_description=f"{route} questions",
            model=_OAFakeModel(_oa_text_events(ANSWER_CHUNKS)),
        )
        for route in ROUTES
    ]
    return OAAgent(
        name="triage",
        instructions="Hand the customer to the right specialist.",
        model=_OAFakeModel(_oa_handoff_events("transfer_to_billing"), "transfer_to_billing"),
        handoffs=list(specialists),
    )


_OA_TRIAGE = _build_openai_agents()


async def openai_agents_routed(text: str) -> str:
    """One routed request through the OpenAI Agents SDK: triage handoff, streamed specialist."""
    result = Runner.run_streamed(_OA_TRIAGE, text, run_config=_OA_RUN_CONFIG)
    chunks: list[str] = []
    async for event in result.stream_events():
        if event.type == "raw_response_event" and isinstance(event.data, ResponseTextDeltaEvent):
            chunks.append(event.data.delta)
    if result.last_agent.name != "billing":
        raise AssertionError(f"handed off to {result.last_agent.name}")
    return _check(chunks, str(result.final_output))


# --------------------------------------------------------------------------- langgraph


class _LGState(TypedDict, total=False):
    text: str
    route: str
    confidence: float
    answer: str


async def _fake_classifier(text: str) -> str:
    """The fake classifier model: one awaited call, a ``route:`` / ``confidence:`` reply."""
    return CLASSIFIER_REPLY


async def _fake_specialist(text: str) -> AsyncIterator[str]:
    """The fake specialist model: the answer in chunks."""
    for chunk in ANSWER_CHUNKS:
        yield chunk


def _parse_reply(reply: str) -> tuple[str, float]:
    fields: dict[str, str] = {}
    for line in reply.splitlines():
        key, _, value = line.partition(":")
        fields[key.strip().lower()] = value.strip()
    return fields.get("route", "general"), float(fields.get("confidence", "0"))


async def _lg_classify(state: _LGState) -> Command[str]:
    route, confidence = _parse_reply(await _fake_classifier(state["text"]))
    if route not in ROUTES:
        route = "general"
    return Command(goto=route, update={"route": route, "confidence": confidence})


async def _lg_specialist(state: _LGState) -> _LGState:
    write = get_stream_writer()
    parts: list[str] = []
    async for chunk in _fake_specialist(state["text"]):
        parts.append(chunk)
        write(chunk)
    return {"answer": "".join(parts)}


def _build_langgraph() -> Any:
    graph = StateGraph(_LGState)
    graph.add_node("classify", _lg_classify, destinations=ROUTES)
    for route in ROUTES:
        graph.add_node(route, _lg_specialist)
    graph.add_edge(START, "classify")
    return graph.compile()


_LG_GRAPH = _build_langgraph()


async def langgraph_routed(text: str) -> str:
    """One routed request through LangGraph: classifier node ``Command(goto)``, streamed node."""
    chunks: list[str] = []
    answer = ""
    async for mode, payload in _LG_GRAPH.astream({"text": text}, stream_mode=["custom", "updates"]):
        if mode == "custom":
            chunks.append(payload)
        elif "billing" in payload:
            answer = payload["billing"]["answer"]
    return _check(chunks, answer)


# --------------------------------------------------------------------------- pydantic-ai


@dataclass
class _PADeps:
    """Per-request dependencies: where the specialist's text deltas go as they arrive."""

    on_delta: Callable[[str], None]
    routed_to: list[str] = field(default_factory=list)


async def _pa_router_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The fake router model: calls the billing route's output tool with the user's question."""
    question = next(
        str(part.content)
        for message in reversed(messages)
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, UserPromptPart)
    )
    tool = next(t for t in info.output_tools if "billing" in t.name)
    return ModelResponse(parts=[ToolCallPart(tool.name, {"query": question})])


async def _pa_specialist_model(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
    for chunk in ANSWER_CHUNKS:
        yield chunk


def _build_pydantic_ai() -> PAAgent[_PADeps, str]:
    specialists = {
        route: PAAgent(
            FunctionModel(stream_function=_pa_specialist_model),
            instructions=f"You answer {route} questions.",
            name=route,
        )
        for route in ROUTES
    }

    async def delegate(ctx: RunContext[_PADeps], route: str, query: str) -> str:
        ctx.deps.routed_to.append(route)
        async with specialists[route].run_stream(query, usage=ctx.usage) as run:
            async for delta in run.stream_text(delta=True, debounce_by=None):
                ctx.deps.on_delta(delta)
            return await run.get_output()

    async def billing(ctx: RunContext[_PADeps], query: str) -> str:
        """Hand the question to the billing specialist."""
        return await delegate(ctx, "billing", query)

    async def technical(ctx: RunContext[_PADeps], query: str) -> str:
        """Hand the question to the technical specialist."""
        return await delegate(ctx, "technical", query)

    async def general(ctx: RunContext[_PADeps], query: str) -> str:
        """Hand the question to the general specialist."""
        return await delegate(ctx, "general", query)

    return PAAgent(
        FunctionModel(_pa_router_model),
        deps_type=_PADeps,
        output_type=[billing, technical, general],
        instructions="Hand the customer to the right specialist.",
        name="router",
    )


_PA_ROUTER = _build_pydantic_ai()


async def pydantic_ai_routed(text: str) -> str:
    """One routed request through Pydantic AI: router output function → streamed delegate."""
    chunks: list[str] = []
    deps = _PADeps(on_delta=chunks.append)
    result = await _PA_ROUTER.run(text, deps=deps)
    if deps.routed_to != ["billing"]:
        raise AssertionError(f"routed to {deps.routed_to}")
    return _check(chunks, result.output)


# --------------------------------------------------------------------------- measurement

PEERS: dict[str, Routed] = {
    "openai-agents": openai_agents_routed,
    "langgraph": langgraph_routed,
    "pydantic-ai": pydantic_ai_routed,
}


async def _main(n: int) -> None:
    medians = await measure_all(PEERS, n)
    fastest = min(medians.values())
    for name, ms in medians.items():
        print(f"{name:14} {ms:7.3f} ms  {ms / fastest:5.1f}x fastest  (median of {n})")


if __name__ == "__main__":
    from _cli import runs_arg

    asyncio.run(_main(runs_arg(__doc__)))
