"""Journal entries: what a durable run writes down, as versioned JSON (never pickle).

Every entry belongs to a session and a run (one turn of the session) and holds one
record, told apart by its ``type``:

- ``run.start`` — the run's input (agent, prompt, history, context, options) and its
  digest; written before the run's first step, again (with a higher ``attempt`` and a
  ``claim``) when the run is replayed or resumed.
- ``step`` — the result of a non-streamed step (classification, tool call), keyed by the
  step's index and the digest of its input.
- ``model`` — a streamed model call: its text chunks and final response.
- ``tool.started`` — written *before* a tool runs, with the call's idempotency key; a
  ``tool.started`` without a matching ``step`` means the tool's outcome is unknown.
- ``step.failed`` — an attempt of a step or model call that raised: the error and, for a
  model call, the text it streamed first (replayed only when a completed run is resumed);
  also where the run's time limit ended an attempt (``limit``), and the request a run's cut
  left waiting at a step (``cut``, with what it spent: counted by the resume that makes the
  step again, see :mod:`.cuts`). A replay of a step's ``step``/``model`` record counts the
  failures of the attempt that recorded it (their ``attempt``; see :mod:`.cuts`).
- ``event`` — one event of the run's stream, as the consumer saw it.
- ``run.end`` — how an attempt of the run ended (``completed``, ``failed``, or ``cut``: cut
  off by the process running it, which wrote this as it stopped, with what the attempt had
  spent; a process that died wrote no ``run.end``).

Readers ignore fields they do not know, in an entry and in its record: a release that adds an
optional field writes entries an older release still reads (one journal shared by both during
a rolling upgrade); only a change an older reader would misread raises ``SCHEMA_VERSION``.
Code building a record is still checked (the type checker knows the fields). A record type
or a schema version a reader does not know was written by a newer release: every read that
meets one raises :class:`JournalError` saying so (:mod:`._decode`), never skipping it,
since any record may decide how a run went.

Step results are stored with a type tag and decoded through pydantic (see
``step_results``); only types registered with ``register_step_type`` or defined inside
``jeeves_router`` are accepted when reading, so a tampered journal cannot make the reader
import arbitrary code.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping
from dataclasses import MISSING, fields, is_dataclass
from typing import Annotated, Any, Literal, Union, get_args

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer
from pydantic_core import PydanticSerializationError, to_jsonable_python

from ..errors import JeevesError, ToolOutcomeUnknown, UsageError  # ToolOutcomeUnknown: re-exported here

__all__ = [
    "SCHEMA_VERSION",
    "JournalError",
    "JournalCorrupt",
    "ToolOutcomeUnknown",
    "RunStartRecord",
    "RunEndRecord",
    "StepRecord",
    "ModelRecord",
    "ToolStartedRecord",
    "StepFailedRecord",
    "EventRecord",
    "Record",
    "Entry",
    "RECORD_TYPES",
    "digest",
    "to_json",
    "json_text",
    "jsonable_mapping",
]

#: Version of the entry format written by this release. Readers accept this version and
#: every older one listed in ``_READABLE_VERSIONS``.
SCHEMA_VERSION = 2
_READABLE_VERSIONS = frozenset({1, 2})  # 2 added ``step.failed``


class JournalError(JeevesError):
    """A journal cannot be used (missing file, newer format, storage failure)."""


class JournalCorrupt(JournalError):
    """A journal entry failed its checksum or could not be read (truncated or tampered)."""


class _Rec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")  # a newer writer's field: see the module docs


class RunStartRecord(_Rec):
    """The input of a run (written at its start and at every replay or resume).

    ``claim`` tells apart the processes that resume the same run at once: the first
    ``run.start`` of a (run, attempt) in journal order wins the attempt, and a loser takes
    the next one (see :func:`jeeves_router.journal.resume.claim_attempt`). Empty on a run's
    first start and in journals written before it existed.

    ``request_digest``: a run requested with an idempotency key (:mod:`.keyed`) records the
    digest of the request as its client sent it (before the session's history was added), so
    a retry with the same key can be told from another request; empty for other runs.
    """

    type: Literal["run.start"] = "run.start"
    agent: str
    prompt: str
    history: list[Any] = Field(default_factory=list)
    context: dict[str, Any] = Field(default_factory=dict)
    force_route: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    input_digest: str
    attempt: int = 1
    claim: str = ""
    request_digest: str = ""


class RunEndRecord(_Rec):
    """How one attempt of a run ended.

    ``cut``: the attempt was cut off (cancelled, e.g. by its server's shutdown, or its stream
    closed early) by the process running it, which wrote this as it stopped: the run is
    unfinished (resumable) and no longer running there. Its ``usage`` (``Usage`` fields) is
    what the attempt had spent: every request whose answer or failure came back and those
    the cut left waiting (sent: they count, their cost unknown), as the served run's
    ``run cut`` log line says; ``None`` in journals written before it was recorded, and
    left out of the entry then (an end written without it reads the same in any release).
    A completed or failed run's spend is in its ``run.completed`` / ``run.failed`` event.
    """

    type: Literal["run.end"] = "run.end"
    attempt: int
    status: Literal["completed", "failed", "cut"]
    error_type: str | None = None
    message: str | None = None
    usage: dict[str, Any] | None = None

    @model_serializer(mode="wrap")
    def _without_unknown_usage(self, write: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out: dict[str, Any] = write(self)
        if out.get("usage") is None:
            out.pop("usage", None)
        return out


class StepRecord(_Rec):
    """The result of a non-streamed step."""

    type: Literal["step"] = "step"
    name: str
    index: int
    digest: str
    result_type: str
    result: Any
    attempt: int | None = None  # the run attempt that made it (None: written before it was kept; see journal.cuts)


class ModelRecord(_Rec):
    """A completed streamed model call: the chunks as streamed and the final response."""

    type: Literal["model"] = "model"
    name: str
    index: int
    digest: str
    model: str
    chunks: list[str]
    response: dict[str, Any]
    attempt: int | None = None  # the run attempt that made it (None: written before it was kept; see journal.cuts)


class ToolStartedRecord(_Rec):
    """A tool call is about to run; written durably before the call.

    ``claim`` tells apart the processes that start the same call of the same run at once
    (e.g. a ``resume`` of a run another process is still executing): the first
    ``tool.started`` in journal order wins and only its writer calls the tool.
    """

    type: Literal["tool.started"] = "tool.started"
    name: str
    index: int
    digest: str
    idempotency_key: str
    attempt: int = 1
    claim: str = ""


class StepFailedRecord(_Rec):
    """An attempt of a step or model call that raised (see :mod:`jeeves_router.journal.failures`)."""

    type: Literal["step.failed"] = "step.failed"
    name: str
    index: int
    digest: str
    attempt: int = 1
    chunks: list[str] = Field(default_factory=list)
    error_type: str
    message: str
    severity: str
    status_code: int | None = None
    retry_after_s: float | None = None
    retries_exhausted: bool = False
    limit: Literal["before", "during", "after"] | None = None  # a time-limit record: see journal.failures
    spent_usage: dict[str, Any] | None = None  # what the failure (or a time-box cut) spent (Usage fields)
    judgements: list[dict[str, Any]] = Field(default_factory=list)  # the ladders' classifications, in order
    claim: str | None = None  # a tool call's: the claim of its tool.started entry (its outcome is known: failed)
    cut: bool = False  # not a failure: what the run's cut left waiting at this step (see journal.cuts)


class EventRecord(_Rec):
    """One event of a run attempt's stream (JSON through ``event_adapter``)."""

    type: Literal["event"] = "event"
    attempt: int
    event: dict[str, Any]


Record = Annotated[
    Union[RunStartRecord, RunEndRecord, StepRecord, ModelRecord, ToolStartedRecord, StepFailedRecord, EventRecord],
    Field(discriminator="type"),
]


#: The record types this release reads; a journal holding another was written by a newer release.
RECORD_TYPES = frozenset(get_args(cls.model_fields["type"].annotation)[0] for cls in get_args(get_args(Record)[0]))


class Entry(BaseModel):
    """One journal entry: schema version, session, run, time and a record.

    ``seq`` is the entry's position in the journal, assigned by the storage on write.
    """

    model_config = ConfigDict(frozen=True, extra="ignore")  # a newer writer's field: see the module docs

    v: int = SCHEMA_VERSION
    session_id: str
    run_id: str
    ts: float = Field(default_factory=time.time)
    record: Record
    seq: int | None = Field(default=None, exclude=True)

    def body(self) -> str:
        r"""The entry as compact JSON (without ``seq``).

        Text with an unpaired UTF-16 surrogate (an emoji cut in half by a JavaScript client)
        cannot be written as UTF-8; such an entry is written with ASCII escapes (``\ud83d``),
        which read back as the same text.
        """
        try:
            return self.model_dump_json(exclude={"seq"})
        except PydanticSerializationError:
            data = self.model_dump(mode="json", exclude={"seq"})
            return json.dumps(data, separators=(",", ":"))  # ensure_ascii: every surrogate escaped

    @classmethod
    def from_body(cls, body: str) -> Entry:
        """The entry :meth:`body` wrote.

        Raises:
            ValidationError: For a body that is not an entry.
        """
        if "\\ud" in body:  # maybe an escaped lone surrogate (json and pydantic write hex in lower case)
            try:
                return cls.model_validate(json.loads(body))
            except ValueError:  # not JSON: pydantic says why, below
                pass
        return cls.model_validate_json(body)


def to_json(value: Any) -> Any:
    """``value`` as JSON-ready data (dataclasses, pydantic models, tuples, mappings).

    Raises:
        UsageError: when ``value`` holds something JSON cannot represent.
    """
    try:
        return to_jsonable_python(value)
    except Exception as exc:  # pydantic raises PydanticSerializationError
        raise UsageError(
            f"cannot record {type(value).__name__} in a journal: {exc}; keep journaled values JSON-ready "
            "(str, numbers, lists, dicts, dataclasses, pydantic models)"
        ) from exc


def _canonical(value: Any) -> Any:
    """JSON-ready ``value`` with dataclass fields left at their defaults omitted.

    Omitting defaults keeps digests stable when a release adds a defaulted field to a
    request type, so journals recorded before keep replaying.
    """
    if is_dataclass(value) and not isinstance(value, type):
        out: dict[str, Any] = {}
        for f in fields(value):
            v = getattr(value, f.name)
            if f.default is not MISSING and v == f.default:
                continue
            if f.default_factory is not MISSING and v == f.default_factory():
                continue
            out[f.name] = _canonical(v)
        return out
    if isinstance(value, BaseModel):
        return _canonical(value.model_dump(mode="json", exclude_defaults=True))
    if isinstance(value, Mapping):
        return {str(k): _canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    return to_json(value)


def json_text(data: Any, **options: Any) -> str:
    r"""``json.dumps(data, ensure_ascii=False, **options)``, for people to read and files to keep.

    Text holding an unpaired UTF-16 surrogate, which UTF-8 cannot carry, comes out with ASCII
    escapes instead (``\ud83d``), so printing or saving it does not fail.
    """
    text = json.dumps(data, ensure_ascii=False, **options)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(data, **options)
    return text


def digest(value: Any) -> str:
    """SHA-256 hex digest of ``value``'s canonical JSON (sorted keys, compact, defaults omitted)."""
    text = json.dumps(_canonical(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()  # a lone surrogate too (a cut emoji)


def jsonable_mapping(value: Mapping[str, Any], *, what: str) -> dict[str, Any]:
    """A JSON-ready copy of ``value`` (for context and options); names ``what`` on failure."""
    try:
        out = to_jsonable_python(dict(value))
    except Exception as exc:
        raise UsageError(f"the run's {what} must be JSON-ready to be journaled: {exc}") from exc
    assert isinstance(out, dict)
    return out
