"""The error tree of jeeves_router.

Every exception the SDK raises derives from :class:`JeevesError`::

    JeevesError
    ├── UsageError                 misuse of the API: fix the calling code
    └── RunError                   something failed while a run was executing
        ├── ModelError             a model call failed (carries severity, status, attempt)
        │   └── StreamInterrupted  a stream broke after text reached the consumer
        ├── ToolError              a tool raised (normally sent back to the model instead)
        │   └── ToolOutcomeUnknown a tool call may have run; whether it did is unknown
        ├── ScriptExhausted        a scripted test model ran out of steps
        ├── RealModelCallBlocked   a real provider was called while calls are blocked
        ├── ExecutionError         a capability or step failed with a chosen severity
        └── ReplayDivergence       a strict replay met a step that is not in the journal

``UsageError`` is raised at construction or call time, before anything runs, and its
message names what was wrong and how to fix it. A ``RunError`` carries the context of the
failure: its severity (a plain string matching :class:`jeeves_router.ErrorSeverity`
values), the route path, the attempt number, and the original exception as ``__cause__``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "JeevesError",
    "UsageError",
    "RunError",
    "ModelError",
    "StreamInterrupted",
    "ToolError",
    "ToolOutcomeUnknown",
    "ScriptExhausted",
    "RealModelCallBlocked",
    "ReplayDivergence",
]


class JeevesError(Exception):
    """Base class of every exception raised by jeeves_router."""


class UsageError(JeevesError, ValueError):
    """The API was used wrongly; the message says what to change.

    Args:
        *args: The message (as any exception's).
        argument: The name of the argument at fault, when the error is about one
            (``"force_route"``, ``"max_concurrency"``): a front door names it in its own terms, the
            HTTP server as the error's ``param``, the command line as the flag the user typed.

    Attributes:
        argument: As given (``None``: the error is about no single argument).
    """

    def __init__(self, *args: object, argument: str | None = None) -> None:
        super().__init__(*args)
        self.argument = argument


def argument_named(name: str) -> str | None:
    """The :attr:`UsageError.argument` of a check that names its value ``name``.

    ``name`` itself when it is an argument's name (``max_concurrency``); ``None`` for a
    description (``"max_scores (how many ranked routes ...)"``, ``"RetryPolicy.jitter"``).
    """
    return name if name.isidentifier() else None


class RunError(JeevesError):
    """A failure while a run executes.

    Attributes:
        severity: One of ``"retriable"``, ``"replanning"``, ``"reclassification"``,
            ``"critical"``, ``"fatal"``.
        path: The route path of the agent that failed, e.g. ``("desk", "billing")``.
        attempt: The 1-based attempt number when the failure happened, if known.
        metadata: Extra, secret-free context.
    """

    default_severity = "critical"

    def __init__(
        self,
        message: str,
        *,
        severity: str | None = None,
        path: tuple[str, ...] = (),
        attempt: int | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.severity = severity or self.default_severity
        self.path = path
        self.attempt = attempt
        self.metadata: dict[str, Any] = dict(metadata or {})

    def __str__(self) -> str:
        return self.message


class ModelError(RunError):
    """A model call failed.

    Attributes:
        status_code: The HTTP status, when the failure came from an HTTP answer.
        retry_after_s: The delay the provider asked for (``Retry-After``), if any.
        provider: ``"openai"``, ``"anthropic"``, ``"llamacpp"``, ... when known.
        retries_exhausted: True when the adapter's retry policy (the one owner of model-call
            retries) already spent every attempt on this failure; no other layer retries it.
    """

    def __init__(
        self,
        message: str,
        *,
        severity: str | None = None,
        status_code: int | None = None,
        retry_after_s: float | None = None,
        provider: str | None = None,
        path: tuple[str, ...] = (),
        attempt: int | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message, severity=severity, path=path, attempt=attempt, metadata=metadata)
        self.status_code = status_code
        self.retry_after_s = retry_after_s
        self.provider = provider
        self.retries_exhausted = False


class StreamInterrupted(ModelError):
    """A streamed call broke after some of its text had reached the consumer.

    It is not retried, by the adapter or by the recovery ladder, even when a ``classify_error``
    hook judges it RETRIABLE: a retry would repeat text the consumer already has (the report's
    ``reason`` is then ``output_started`` and its ``not_retried`` says so).
    """

    default_severity = "critical"


class ToolError(RunError):
    """A tool failed. The tool loop normally reports it to the model instead of raising.

    Raise it from a tool to tell the model what was wrong (``ToolError("invoice ids look like
    INV-1234")``): its message is written for the model, so the tool result shows it whatever
    ``Recovery(expose_details=...)`` says; any other exception is shown by its type only unless
    details are exposed.
    """


class ToolOutcomeUnknown(ToolError):
    """A tool call that may have run, and whether it did is unknown: it is not made again on its own.

    The one error of an unknown outcome. Raised by an MCP tool call whose server had the
    request and then did not answer: its connection ended, or no answer came within its
    ``timeout`` (:mod:`jeeves_router.mcp`); by a ``@tool`` function of yours (a payment API
    that timed out), which :meth:`Tool.call <jeeves_router.tools.Tool.call>` lets through;
    and by a journaled resume under ``on_unknown_tool_outcome="fail"`` for a call started
    with no outcome recorded (a crash during it, another process making it). A call that
    provably never ran is not this error. A ``repeatable`` tool's (MCP or local) comes back
    to the model as an error result instead: calling it again is harmless.

    ``critical`` by default: the recovery ladder stops the run with a report (no retry, and
    the model is never shown it, so it cannot call the tool again). Under a
    :class:`~jeeves_router.journal.JournalRuntime` the call stays recorded as started with
    no outcome, so a resume (or a retry a ``classify_error`` hook asks for) applies
    ``on_unknown_tool_outcome``: ``"fail"``, ``"retry"`` with the same idempotency key,
    or ``"skip"``. ``metadata`` names the tool (and the MCP server, or the step and key).
    """

    default_severity = "critical"


class ScriptExhausted(RunError):
    """A :class:`~jeeves_router.testing.ScriptedModel` was called after its last step."""

    default_severity = "fatal"


class RealModelCallBlocked(RunError):
    """A real provider model was called while real calls are blocked (in tests)."""

    default_severity = "fatal"


class ReplayDivergence(RunError):
    """Strict replay met a step whose input differs from the recorded one."""

    default_severity = "fatal"
