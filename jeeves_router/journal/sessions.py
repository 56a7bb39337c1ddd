"""Multi-turn sessions read back from the journal: a session's turns and the history they make.

The journal already records every root run of a session (``run.start`` with its prompt, the
run's events, ``run.end``), so it is also the session store: a later turn's history is the
earlier turns' prompts and answers, read back from it. Turn it on with
``JournalRuntime(journal, session_history=SessionHistory())``; then
``agent.run(text, session_id=sid)`` called without ``history`` sees the session's earlier
turns (a run given an explicit ``history`` uses that instead).

History limits (:class:`SessionHistory`): only turns of the same agent that ended with an
answer count (``ok``/``fallback``; failed, unresolved and interrupted turns are left out);
at most the last ``max_turns`` of them; and the oldest are dropped until the history's
text is at most ``max_chars`` characters (the newest turn is always kept whole). Answers
need the run's events in the journal (``record_events=True``, the default).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any, cast

from .._routing import ROUTING_KINDS, routing_update
from ..errors import UsageError
from ..events import event_adapter
from ..messages import Message, assistant, user
from ..reply import ReplyText
from ..results import RunResult, RunStatus
from ..usage import Usage
from .base import Journal
from .records import EventRecord, RunEndRecord, RunStartRecord
from .resume import RecordedRuns

__all__ = ["SessionHistory", "Turn", "session_turns", "history_from_turns"]


@dataclass(frozen=True, slots=True)
class SessionHistory:
    """How much of a session's past a new turn sees.

    Args:
        max_turns: At most this many earlier answered turns (a turn is a user message
            and the answer to it).
        max_chars: Drop the oldest turns until the text of the history is at most this
            many characters; the newest turn is always kept.
    """

    max_turns: int = 20
    max_chars: int = 32_000

    def __post_init__(self) -> None:
        for name in ("max_turns", "max_chars"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise UsageError(f"SessionHistory.{name} must be a positive integer, got {value!r}")


@dataclass(frozen=True, slots=True)
class Turn:
    """One root run of a session, as the journal recorded it.

    Attributes:
        run_id: The run's id in the journal.
        agent: The agent that ran it.
        prompt: The request text.
        output: The answering agent's last reply (``RunResult.output``; ``None`` when the run
            gave none): what a later turn's history holds as the assistant's message.
        status: The run's status (``ok``, ``fallback``, ``unresolved``, ...), ``failed``
            when it raised, ``cut`` when its attempt was cut off (cancelled: its server shut
            down, its client left, its stream was closed early; ``Agent.resume()`` can finish
            it), ``incomplete`` when no end was recorded (still running, or its process died).
        route: The route that answered (routed runs); for a run with no result (it failed
            or was cut off), the route it was sent to, if it got that far.
        confidence: The classifier's confidence for that route.
        fallback_reason: Why the fallback route answered, if it did.
        ts: When the run started (seconds since the epoch).
        reply: What the run said to its user, by the rule of every front door
            (:class:`~jeeves_router.reply.ReplyText`: every agent's text in order, then the
            answer if it was not streamed, or a stopped run's message for the end user),
            rebuilt from the run's journaled events. A run without a result (``failed``,
            ``cut``, ``incomplete``) has said the text it streamed before it stopped (what its
            streaming client was sent; a whole reply's client got an error instead): that text,
            ``None`` if there was none. ``output`` stays ``None`` for such a turn.
        usage: What the turn's attempt spent, failed requests included: a completed run's
            ``RunResult.usage``, a failed run's ``run.failed`` usage, a cut run's ``run.end``
            usage (also the requests the cut left unanswered: the served ``run cut`` log
            line's figure); ``None`` when the journal has none (an incomplete turn, a cut
            recorded by an older release, or events not recorded).
    """

    run_id: str
    agent: str
    prompt: str
    output: str | None
    status: str
    route: str | None = None
    confidence: float | None = None
    fallback_reason: str | None = None
    ts: float = 0.0
    reply: str | None = None
    usage: Usage | None = None

    def as_dict(self) -> dict[str, Any]:
        """The turn as JSON-ready data."""
        return {
            "run_id": self.run_id,
            "agent": self.agent,
            "prompt": self.prompt,
            "reply": self.reply,
            "output": self.output,
            "status": self.status,
            "route": self.route,
            "confidence": self.confidence,
            "fallback_reason": self.fallback_reason,
            "ts": self.ts,
            "usage": asdict(self.usage) if self.usage is not None else None,
        }


async def session_turns(journal: Journal, session_id: str, *, agent: str | None = None) -> list[Turn]:
    """The root runs of ``session_id`` in the order they started (optionally one agent's).

    A run replayed or resumed (several attempts) is one turn, described by its last
    completed attempt, else its latest one (:meth:`.resume.RecordedRuns.telling`).
    """
    entries = await journal.read(session_id, types=("run.start", "run.end", "event"))
    runs = RecordedRuns.of(entries)
    starts: dict[str, tuple[RunStartRecord, float]] = {}
    results: dict[str, Mapping[str, Any]] = {}
    failed: dict[str, Any] = {}  # the usage of each failed run's root run.failed
    replies: dict[str, ReplyText] = {}  # the text each run said, event by event
    routed: dict[str, dict[str, Any]] = {}  # what the root's routing events tell, latest last
    ends: dict[str, RunEndRecord] = {}
    adapter = event_adapter()
    for e in entries:
        rec = e.record
        if isinstance(rec, RunStartRecord):
            starts.setdefault(e.run_id, (rec, e.ts))
        elif isinstance(rec, (RunEndRecord, EventRecord)) and rec.attempt != runs.telling(e.run_id):
            continue  # another attempt's end or events
        elif isinstance(rec, RunEndRecord):
            ends[e.run_id] = rec
        elif isinstance(rec, EventRecord):
            kind = rec.event.get("kind")
            text = rec.event.get("text") if kind == "text.delta" else None
            said = (text if isinstance(text, str) else "") if kind == "text.delta" else None
            replies.setdefault(e.run_id, ReplyText()).add(said)
            first = starts.get(e.run_id)
            if kind not in _ROOT_KINDS or first is None or list(rec.event.get("path", ())) != [first[0].agent]:
                continue
            if kind == "run.completed":
                results[e.run_id] = rec.event.get("result") or {}
                continue
            if kind == "run.failed":
                failed[e.run_id] = rec.event.get("usage")
                continue
            update = routing_update(adapter.validate_python(rec.event))
            if update is not None:
                routed.setdefault(e.run_id, {}).update(update)
    turns: list[Turn] = []
    for run_id, (start, ts) in starts.items():
        if agent is not None and start.agent != agent:
            continue
        end = ends.get(run_id)
        result = results.get(run_id) or routed.get(run_id, {})  # no result: how far its routing got
        if end is None:
            status = "incomplete"
        elif end.status in ("cut", "failed"):
            status = end.status
        else:
            status = str(result.get("status", "ok"))
        confidence = result.get("confidence")
        output = result.get("output") if status not in ("failed", "cut", "incomplete") else None
        if end is not None and end.status == "cut":
            spent = end.usage
        else:
            spent = failed.get(run_id) if status == "failed" else results.get(run_id, {}).get("usage")
        turns.append(
            Turn(
                run_id=run_id,
                agent=start.agent,
                prompt=start.prompt,
                output=output,
                reply=_said(replies.get(run_id), result if run_id in results else None, output),
                status=status,
                route=result.get("route"),
                confidence=float(confidence) if isinstance(confidence, (int, float)) else None,
                fallback_reason=result.get("fallback_reason"),
                ts=ts,
                usage=_usage(spent),
            )
        )
    return turns


_ROOT_KINDS = ROUTING_KINDS | {"run.completed", "run.failed"}
_USAGE_FIELDS = frozenset(f.name for f in fields(Usage))


def _usage(data: Any) -> Usage | None:
    """The ``Usage`` a journaled record or event holds (``Usage`` fields; a newer field is ignored)."""
    if not isinstance(data, Mapping):
        return None
    return Usage(**{k: v for k, v in data.items() if k in _USAGE_FIELDS})


def _said(reply: ReplyText | None, result: Mapping[str, Any] | None, output: str | None) -> str | None:
    """The text a run said: its events' text, then, for a completed run, its answer (:meth:`ReplyText.end`).

    A run without a result (``result`` is ``None``: it failed, was cut or has not ended) said
    only the text it streamed.
    """
    if result is None:
        return reply.text if reply is not None else None
    report = result.get("report")
    status = cast(RunStatus, str(result.get("status", "ok")))
    report = report if isinstance(report, Mapping) else None
    ended = RunResult(output=output, status=status, session_id="", report=report)
    reply = reply if reply is not None else ReplyText()
    reply.end(ended)
    return reply.text


def history_from_turns(turns: list[Turn], limits: SessionHistory) -> tuple[Message, ...]:
    """The conversation the answered ``turns`` make, within ``limits`` (see module docs)."""
    answered = [t for t in turns if t.status in ("ok", "fallback") and t.output is not None]
    kept: list[Turn] = []
    chars = 0
    for t in reversed(answered[-limits.max_turns :]):
        size = len(t.prompt) + len(t.output or "")
        if kept and chars + size > limits.max_chars:
            break
        kept.append(t)
        chars += size
    messages: list[Message] = []
    for t in reversed(kept):
        messages += [user(t.prompt), assistant(t.output or "")]
    return tuple(messages)


async def load_history(journal: Journal, session_id: str, agent: str, limits: SessionHistory) -> tuple[Message, ...]:
    """The history a new turn of ``agent`` in ``session_id`` sees."""
    return history_from_turns(await session_turns(journal, session_id, agent=agent), limits)
