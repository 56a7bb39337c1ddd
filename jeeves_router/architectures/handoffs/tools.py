"""The pieces a handoff hop is made of: generated tools, the agent view, and the target's input.

* :func:`classify_tool` and :func:`transfer_tool` generate ``classify_as_<route>`` and
  ``transfer_to_<agent>`` tools that return a :class:`~jeeves_router.tools.Handoff`.
* :class:`GuardedTool` wraps an agent's own tool so an unknown handoff target it returns
  becomes a correctable tool error; :func:`declares_handoff` tells an own tool that may
  return a ``Handoff`` (declared ``-> Handoff``) without calling it.
* :func:`agent_view` gives a hop's architecture a shallow copy of the agent with the extra
  tools, so the agent itself is never modified.
* :func:`target_conversation` turns a :class:`HandoffInput` into what the target sees,
  according to the history mode (``"all"``, ``"last"`` or a callable).
* :func:`announces_handoff` is the default check for a reply that says it hands off but
  calls no tool.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Union, get_args, get_type_hints

from ...errors import UsageError
from ...messages import Message, TextPart, ToolCallPart, ToolResultPart, user
from ...tools import Handoff, Tool, ToolContext, ToolOutcome

if TYPE_CHECKING:
    from ...actor import Actor
    from ..base import Architecture

__all__ = [
    "CLASSIFY_PREFIX",
    "TRANSFER_PREFIX",
    "HandoffInput",
    "HistoryMode",
    "GuardedTool",
    "declares_handoff",
    "classify_tool",
    "transfer_tool",
    "agent_view",
    "target_conversation",
    "handoff_note",
    "announces_handoff",
    "validate_history_mode",
]

CLASSIFY_PREFIX = "classify_as_"
TRANSFER_PREFIX = "transfer_to_"


@dataclass(frozen=True, slots=True)
class HandoffInput:
    """What a history callable is given when building the target's conversation.

    Attributes:
        history: The conversation the caller passed to the run.
        request: The user's request of this run.
        transcript: Messages earlier agents of this run added after the request
            (their replies, tool calls and tool results).
        from_agent: The agent handing off.
        to_agent: The agent receiving the conversation.
        reason: The stated reason of the handoff.
        payload: The handoff's payload, if any.
    """

    history: tuple[Message, ...]
    request: str
    transcript: tuple[Message, ...]
    from_agent: str
    to_agent: str
    reason: str | None = None
    payload: Mapping[str, Any] | None = None


#: ``"all"``: the caller's history, the request and everything earlier agents of this run
#: said and called; ``"last"``: the request only; a callable: any messages built from a
#: :class:`HandoffInput`.
HistoryMode = Union[Literal["all", "last"], Callable[[HandoffInput], Sequence[Message]]]


def validate_history_mode(mode: object) -> None:
    """Raise :class:`UsageError` unless ``mode`` is ``"all"``, ``"last"`` or a callable."""
    if mode not in ("all", "last") and not callable(mode):
        raise UsageError(f"history must be 'all', 'last' or a callable(HandoffInput) -> list[Message], got {mode!r}")


def handoff_note(inp: HandoffInput) -> str:
    """The user-turn text that tells the target why it has the conversation."""
    note = f"[{inp.from_agent} handed this conversation to you ({inp.to_agent})"
    if inp.reason:
        note += f"; reason: {inp.reason}"
    if inp.payload:
        note += f"; details: {json.dumps(dict(inp.payload), default=str, ensure_ascii=False)}"
    return note + ".] Reply to the user's last request."


def target_conversation(mode: HistoryMode, inp: HandoffInput) -> tuple[tuple[Message, ...], str]:
    """Split what the target sees into ``(history, prompt)`` for its run.

    The conversation is built by ``mode``; when it ends with a plain user message, that
    message is the prompt; otherwise the prompt is :func:`handoff_note`.

    Raises:
        UsageError: when a history callable returns something other than messages.
    """
    if mode == "all":
        msgs: list[Message] = [*inp.history, user(inp.request), *flatten_tool_turns(inp.transcript)]
    elif mode == "last":
        msgs = [user(inp.request)]
    else:
        assert callable(mode)
        out = mode(inp)
        msgs = list(out)
        if not all(isinstance(m, Message) for m in msgs):
            raise UsageError("a history callable must return a sequence of Message objects")
    last = msgs[-1] if msgs else None
    if last is not None and last.role == "user" and last.text and all(isinstance(p, TextPart) for p in last.parts):
        return tuple(msgs[:-1]), last.text
    return tuple(msgs), handoff_note(inp)


def flatten_tool_turns(messages: Sequence[Message]) -> list[Message]:
    """Earlier agents' tool calls and results rewritten as plain assistant notes.

    The target agent does not have the earlier agents' tools (``classify_as_*``,
    ``transfer_to_*``, their own tools); providers such as Anthropic reject tool blocks
    for tools a request does not declare, so the target sees each call and its result as
    a text note in the assistant turn that made the call.
    """
    results: dict[str, ToolResultPart] = {}
    for m in messages:
        for p in m.parts:
            if isinstance(p, ToolResultPart):
                results[p.call_id] = p
    out: list[Message] = []
    for m in messages:
        calls = [p for p in m.parts if isinstance(p, ToolCallPart)]
        if m.role == "tool" or any(isinstance(p, ToolResultPart) for p in m.parts):
            continue  # folded into the call's note
        if not calls:
            out.append(m)
            continue
        notes = []
        for c in calls:
            args = json.dumps(dict(c.arguments), default=str, ensure_ascii=False)
            r = results.get(c.id)
            notes.append(f"[called {c.name}({args})" + (f" -> {r.content}]" if r is not None else "]"))
        text = "\n".join([m.text, *notes]) if m.text else "\n".join(notes)
        out.append(Message("assistant", (TextPart(text),)))
    return out


def classify_tool(name: str, description: str = "", examples: Sequence[str] = ()) -> Tool:
    """The ``classify_as_<name>`` tool: returns ``Handoff(target=name, reason, confidence)``.

    The confidence is passed on as given: the router's decision (the same contract check
    and :func:`~jeeves_router.classify.resolve.resolve_route` as :class:`Router`) sends a
    confidence outside [0, 1] to the fallback instead of re-prompting the model.
    """

    async def classify(reason: str, confidence: float | None = None) -> Handoff:
        return Handoff(target=name, reason=reason, confidence=confidence)

    text = f"Route the request to '{name}'"
    text += f": {description}" if description else "."
    if examples:
        text += " Examples: " + "; ".join(json.dumps(e, ensure_ascii=False) for e in list(examples)[:5])
    text += " Give a short reason and your confidence in [0, 1]."
    return Tool(classify, name=f"{CLASSIFY_PREFIX}{name}", description=text)


@functools.lru_cache(maxsize=1024)
def transfer_tool(target: str, description: str = "") -> Tool:
    """The ``transfer_to_<target>`` tool: returns ``Handoff(target=target, reason)``.

    Cached: a tool is stateless, and building its argument model is the costly part of a hop.
    """

    async def transfer(reason: str = "") -> Handoff:
        return Handoff(target=target, reason=reason or None)

    text = f"Hand the conversation to '{target}'"
    text += f": {description}" if description else "."
    return Tool(transfer, name=f"{TRANSFER_PREFIX}{target}", description=text)


class GuardedTool(Tool):
    """An agent's own tool whose outcome passes through ``check`` (e.g. to vet a handoff target)."""

    def __init__(self, inner: Tool, check: Callable[[ToolOutcome], ToolOutcome]) -> None:
        # Share the inner tool's name, schema and function without re-reading its hints.
        self.__dict__.update(vars(inner))
        self._inner = inner
        self._check = check

    @property
    def repeatable(self) -> bool:
        """The inner tool's (an MCP tool answers it from its server's setting)."""
        return self._inner.repeatable

    async def call(self, arguments: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        """Run the inner tool, then ``check`` its outcome."""
        outcome = await self._inner.call(arguments, ctx)
        return self._check(outcome) if outcome.handoff is not None else outcome


def declares_handoff(tool: Tool) -> bool:
    """True when ``tool``'s function is declared to return a :class:`Handoff` (alone or in a union).

    Read from the return annotation, so a call the tool loop never ran (an earlier call of
    its turn handed off) can still be told for a handoff; a tool without one (an MCP tool,
    an unannotated function) is not taken for one.
    """
    fn = getattr(tool, "fn", None)
    try:
        returns = get_type_hints(fn).get("return") if fn is not None else None
    except Exception:  # unresolvable hints: Tool() refuses those, a subclass may not have checked
        return False
    pending = [returns]
    while pending:
        ann = pending.pop()
        if ann is Handoff:
            return True
        pending.extend(get_args(ann))
    return False


def agent_view(
    agent: Actor,
    *,
    tools: Sequence[Tool],
    architecture: Architecture,
    instructions: str | None = None,
    temperature: float | None = None,
) -> Actor:
    """A shallow copy of ``agent`` with other tools and architecture (``agent`` is untouched)."""
    view = copy.copy(agent)
    view.tool_map = {t.name: t for t in tools}
    view.tools = tuple(tools)
    view.architecture = architecture
    if instructions is not None:
        view.instructions = instructions
    if temperature is not None:
        view.temperature = temperature
    return view


_WHAT = r"(?:you|this|it|(?:the|your)\s+(?:conversation|chat|request|case|ticket|question|call))"
_ANNOUNCE = re.compile(
    rf"\b(?:transfer(?:ring)?|connect(?:ing)?|rout(?:e|ing)|forward(?:ing)?|redirect(?:ing)?|escalat(?:e|ing))\s+{_WHAT}\b"
    rf"|\bhand(?:ing)?\s+(?:{_WHAT}\s+(?:off|over)|off)\b"
    rf"|\bpass(?:ing)?\s+{_WHAT}\s+(?:on|over|along)\b",
    re.IGNORECASE,
)
_TOOLISH = re.compile(rf"\b(?:{TRANSFER_PREFIX}|{CLASSIFY_PREFIX})[A-Za-z0-9_-]+")
_WHO = re.compile(r"\b(?:specialists?|team|agent|department|colleague|expert|desk|router)\b", re.IGNORECASE)


def announces_handoff(text: str, targets: Sequence[str]) -> bool:
    """True when ``text`` says it hands the conversation on (but it is plain text).

    A reply counts when it names a handoff tool, or when it uses a handoff phrase about
    the conversation ("transferring you", "I'll hand this over", "routing your request")
    together with one of ``targets`` or a word like "team" or "specialist". Moving money
    ("our team will transfer the refund") does not count.
    """
    if not text:
        return False
    if _TOOLISH.search(text):
        return True
    if not _ANNOUNCE.search(text):
        return False
    low = text.lower()
    if any(t.lower() in low or t.lower().replace("-", " ").replace("_", " ") in low for t in targets):
        return True
    return _WHO.search(text) is not None
