"""Tools: typed Python functions a model may call.

``@tool`` turns a sync or async function into a :class:`Tool` whose argument schema is
made by pydantic from the type hints. Arguments are validated before the call; a
validation error or an exception raised by the function goes back to the model as an
error result (the run goes on; an exception by its type, its message only where the run's
``Recovery(expose_details=True)`` allows, or when it is a :class:`~jeeves_router.errors.ToolError`,
which a tool raises to tell the model what was wrong), never as a crash; but a
:class:`~jeeves_router.errors.ToolOutcomeUnknown` (it may have run) propagates, as an MCP
tool's does, unless the tool is ``repeatable`` (:attr:`Tool.repeatable`: harmless to call
twice, e.g. a read; a framework retry runs it again, see :mod:`jeeves_router.ledger`).

A parameter annotated :class:`ToolContext` is injected (not shown to the model). A tool may
return :class:`Handoff` to pass the conversation to another agent, or
:class:`ContextUpdate` to change the run's context variables (copy on write: the caller's
mapping is never modified), or the :class:`~jeeves_router.results.RunResult` of an agent it
ran (an agent as a tool): the model gets its ``output`` and the calling run counts its
``usage`` (:attr:`ToolOutcome.usage`); so does the ``spent_usage`` of an exception a tool
raises (:func:`~jeeves_router.usage.spent_usage`: an inner run's failed model call).

A :class:`Toolset` (e.g. :class:`jeeves_router.mcp.MCPServerStdio`) is a source of tools
that must be opened first; an agent opens its toolsets around each run with
:func:`open_toolsets` and its tool loop then sees their tools like any other.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, get_type_hints, overload

import anyio.to_thread

from ._args import check_handoff, returned_awaitable
from ._articles import a_type
from ._frozen import frozen
from ._shown import shown_error
from ._toolset_host import TaskHost, ToolsetHost, current_toolset_host, toolset_host
from ._toolsets import Toolset, open_toolsets, split_toolsets
from .errors import ToolError, ToolOutcomeUnknown, UsageError
from .models.base import ToolSpec
from .results import RunResult
from .usage import NO_USAGE, Usage, spent_usage

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = [
    "TOOL_NAME_CHARS",
    "TOOL_NAME_PATTERN",
    "Tool",
    "check_tool_name",
    "tool",
    "ToolContext",
    "ToolOutcome",
    "Handoff",
    "ContextUpdate",
    "Toolset",
    "TaskHost",
    "ToolsetHost",
    "toolset_host",
    "open_toolsets",
    "split_toolsets",
    "current_toolset_host",
]


@dataclass(frozen=True, slots=True)
class Handoff:
    """A tool result that hands the conversation to ``target``.

    Attributes:
        target: The route or agent name to hand off to (a string: ``billing.name``, not the agent).
        reason: Why (shown in events and to the target).
        payload: Optional JSON-ready data for the target.
        confidence: Optional confidence of a classification handoff, in [0, 1] (outside it: the fallback).

    Raises:
        UsageError: for a target that is not a non-empty string (an ``Agent`` given in its name's
            place), a reason that is not a string, a payload that is not a mapping, or a
            confidence that is not a number (one outside [0, 1] sends it to the fallback).
    """

    target: str
    reason: str | None = None
    payload: Mapping[str, Any] | None = None
    confidence: float | None = None

    def __post_init__(self) -> None:
        check_handoff(self.target, self.reason, self.payload, self.confidence)


@frozen
class ContextUpdate:
    """A tool result that sets context variables for the rest of the run.

    Attributes:
        values: Variables to set (merged over the current ones, copy on write).
        content: What the model is told the tool returned.
    """

    values: Mapping[str, Any]
    content: str = "ok"


@frozen
class ToolContext:
    """What a tool may read of the run that called it.

    ``expose_details`` is that run's ``Recovery(expose_details=...)``: whether the model is
    shown the message of an exception the tool raises, or its type only (:mod:`jeeves_router._shown`).
    """

    session_id: str
    path: tuple[str, ...]
    context: Mapping[str, Any] = field(default_factory=dict)
    expose_details: bool = False


@frozen
class ToolOutcome:
    """The result of one tool call, as the tool loop sees it.

    Attributes:
        content: What the model is told the tool returned.
        is_error: The call failed (the model is told so).
        handoff: The tool handed the conversation on.
        context_update: Context variables the tool set.
        usage: What model requests made by the tool cost: an agent run it returned (its
            ``RunResult.usage``) or the ``spent_usage`` of the exception it raised. The tool
            loop counts it in the calling run's usage and enters it in the run's ledger under
            the calling agent's path, as its own model calls are; a journal records it with
            the outcome (a replay counts it without calling the tool). An outcome the ledger
            answers a retry with has none: the call ran once, its usage counted then.
    """

    content: str
    is_error: bool = False
    handoff: Handoff | None = None
    context_update: Mapping[str, Any] | None = None
    usage: Usage = NO_USAGE


def _to_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    dump = getattr(value, "model_dump_json", None)  # a pydantic model (pydantic loads on first tool)
    if callable(dump):
        return str(dump())
    try:
        return json.dumps(value, default=str, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


def _agent_outcome(name: str, result: RunResult) -> ToolOutcome:
    """The outcome of a tool that returned an agent's run: its ``output``, its ``usage``."""
    if result.output is not None:
        return ToolOutcome(result.output, usage=result.usage)
    said = result.user_message
    content = f"{name}: the agent gave no answer (status {result.status})" + (f": {said}" if said else "")
    return ToolOutcome(content, is_error=True, usage=result.usage)


#: The characters OpenAI and Anthropic accept in a tool name (ASCII only).
TOOL_NAME_CHARS = "a-zA-Z0-9_-"
#: The tool names they accept: ``^[a-zA-Z0-9_-]{1,64}$``.
TOOL_NAME_PATTERN = f"[{TOOL_NAME_CHARS}]{{1,64}}"
_TOOL_NAME_RE = re.compile(TOOL_NAME_PATTERN)


def check_tool_name(name: object) -> str:
    """Return ``name`` if the model providers accept it as a tool name, else raise :class:`UsageError`.

    The rule is OpenAI's and Anthropic's, ``^[a-zA-Z0-9_-]{1,64}$``: ASCII letters and
    digits only (``str.isalnum`` would also pass ``é`` or ``名``, which both providers
    refuse with a 400 at the first request).

    Raises:
        UsageError: naming the tool and the rule, with the way out (``@tool(name=...)``).
    """
    if not isinstance(name, str) or _TOOL_NAME_RE.fullmatch(name) is None:
        raise UsageError(
            f"tool name {name!r} is not accepted by model providers: use 1-64 ASCII letters, digits, '_' or '-' "
            "(the rule ^[a-zA-Z0-9_-]{1,64}$); name the tool with @tool(name=...)"
        )
    return name


class Tool:
    """A callable tool with a JSON schema for its arguments.

    ``repeatable`` (a read-only property): harmless to call twice (typically a read). A
    framework retry calls it again rather than answering it from an abandoned attempt's call
    (the ledger asks only this), and a :class:`~jeeves_router.errors.ToolOutcomeUnknown` it
    raises comes back to the model as an error result instead of stopping the run.
    """

    _repeatable = False  # a class default: a subclass that does not call __init__ has it too

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        repeatable: bool = False,
    ) -> None:
        if not isinstance(repeatable, bool):
            raise UsageError(f"tool {name or getattr(fn, '__name__', fn)!r}: repeatable must be True or False")
        own_name = getattr(fn, "__name__", None)
        if not (inspect.isfunction(fn) or inspect.ismethod(fn)):  # a partial, a callable object, a builtin
            raise UsageError(
                f"tool {name or own_name or type(fn).__name__!r}: wraps a function or a bound method (def or "
                f"async def, with type hints), not {a_type(fn)}; write a def that calls it"
            )
        if description is not None and not isinstance(description, str):
            raise UsageError(f"tool {name or own_name!r}: description must be a string, got {description!r}")
        self.fn: Callable[..., Any] = fn
        self._repeatable = repeatable
        self.name = check_tool_name(name or own_name)
        doc = inspect.getdoc(fn) or ""
        self.description = description if description is not None else doc.split("\n\n")[0].strip()
        self._is_async = inspect.iscoroutinefunction(fn)
        try:
            hints = get_type_hints(fn)
        except Exception as exc:
            raise UsageError(f"tool {self.name!r}: cannot read its type hints ({exc})") from exc
        fields: dict[str, Any] = {}
        self._ctx_param: str | None = None
        params = inspect.signature(fn).parameters
        first = next(iter(params), None)
        if first in ("self", "cls") and inspect.isfunction(fn):  # @tool in a class body: the model would pass it
            hint = f"make the tool from the bound method (tool(obj.{fn.__name__}), e.g. in __init__) or a function"
            raise UsageError(f"tool {self.name!r}: its first parameter is {first!r}, so it is a method; {hint}")
        for pname, param in params.items():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise UsageError(f"tool {self.name!r}: *args/**kwargs are not supported (parameter {pname!r})")
            ann = hints.get(pname, Any)
            if ann is ToolContext:
                self._ctx_param = pname
                continue
            default = ... if param.default is inspect.Parameter.empty else param.default
            fields[pname] = (ann, default)
        from pydantic import ConfigDict, create_model  # imported with the first tool, not with the package

        self._args_model: type[BaseModel] = create_model(  # type: ignore[call-overload]
            f"{self.name}_args", __config__=ConfigDict(extra="forbid"), **fields
        )
        schema = self._args_model.model_json_schema()
        schema.pop("title", None)
        self.parameters: dict[str, Any] = schema
        self.spec = ToolSpec(self.name, self.description, schema)

    @property
    def repeatable(self) -> bool:
        """Harmless to call twice (see the class docstring); an MCP tool asks its server."""
        return self._repeatable

    def __repr__(self) -> str:
        return f"Tool({self.name!r})"

    async def call(self, arguments: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        """Validate ``arguments``, run the function, and report the outcome (an exception: an error result).

        Raises:
            UsageError: when a sync function returns an awaitable (declare it ``async def``).
            ToolOutcomeUnknown: raised by the function of a tool that is not ``repeatable``
                (it may have run: never shown to the model, which could call it again; a
                journal keeps its outcome unknown). Its ``metadata`` gets ``"tool"``.
                Cancellation propagates too.
        """
        from pydantic import ValidationError

        try:
            parsed = self._args_model.model_validate(dict(arguments))
        except ValidationError as exc:
            msgs = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors())
            return ToolOutcome(f"invalid arguments for {self.name}: {msgs}", is_error=True)
        kwargs = {k: getattr(parsed, k) for k in type(parsed).model_fields}
        if self._ctx_param is not None:
            kwargs[self._ctx_param] = ctx
        try:
            if self._is_async:
                value = await self.fn(**kwargs)
            else:
                value = await anyio.to_thread.run_sync(lambda: self.fn(**kwargs), abandon_on_cancel=True)
        except ToolOutcomeUnknown as exc:
            if not self.repeatable:  # it may have run: never shown to the model, never called again on its own
                exc.metadata.setdefault("tool", self.name)
                raise
            used = spent_usage(exc) or NO_USAGE
            failed = shown_error(exc, expose_details=ctx.expose_details)
            return ToolOutcome(f"{self.name} failed: {failed} (it may be called again)", is_error=True, usage=used)
        except Exception as exc:
            used = spent_usage(exc) or NO_USAGE  # an inner agent run's failed model call was paid for
            # its message may quote a secret: the model is shown its type unless details are exposed,
            # but a ToolError the tool raised is a message written for the model: always shown
            failed = shown_error(exc, expose_details=ctx.expose_details or isinstance(exc, ToolError))
            return ToolOutcome(f"{self.name} failed: {failed}", is_error=True, usage=used)
        if not self._is_async and inspect.isawaitable(value):  # a def that forgot to be async: nothing awaited it
            raise returned_awaitable(self.name, value)
        if isinstance(value, RunResult):  # an agent as a tool: its answer for the model, its usage for the run
            return _agent_outcome(self.name, value)
        if isinstance(value, Handoff):
            return ToolOutcome(f"handing off to {value.target}", handoff=value)
        if isinstance(value, ContextUpdate):
            return ToolOutcome(value.content, context_update=dict(value.values))
        return ToolOutcome(_to_text(value))


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    *, name: str | None = None, description: str | None = None, repeatable: bool = False
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    repeatable: bool = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a :class:`Tool` from a typed function (sync or async).

    ``@tool`` or ``@tool(name=..., description=..., repeatable=...)`` on a function, or ``tool(obj.m)``
    on a bound method (in a class body, on a partial or a callable object: a UsageError). The
    description defaults to the docstring's first paragraph (empty without one); a parameter
    without a type hint takes any JSON value (as in pydantic-ai and the OpenAI Agents SDK). Sync
    functions run in a worker thread, which a cancelled or timed-out run does not wait for. A
    result that is not text goes to the model as JSON (an object JSON cannot hold, by its
    ``str``). ``repeatable=True``: see :attr:`Tool.repeatable`.
    """
    if fn is not None:
        return Tool(fn, name=name, description=description, repeatable=repeatable)

    def wrap(f: Callable[..., Any]) -> Tool:
        return Tool(f, name=name, description=description, repeatable=repeatable)

    return wrap


def as_tool(obj: Tool | Callable[..., Any] | Callable[..., Awaitable[Any]]) -> Tool:
    """Accept a Tool or a plain function (wrapped with :func:`tool`)."""
    return obj if isinstance(obj, Tool) else Tool(obj)
