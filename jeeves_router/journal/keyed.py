"""Runs requested with a client's idempotency key: a retried request is answered by the first one's run.

The key names the run: a request with key ``K`` in session ``S`` runs as
:func:`~jeeves_router.ids.keyed_run_id` ``(S, K)`` (without a session id, ``S`` is
:func:`~jeeves_router.ids.keyed_session_id` ``(K)``), so a retry finds the run with one read
of that run's entries: no second store, no index. The run's first ``run.start`` also
records the digest of the request as the client sent it (``request_digest``: agent, prompt,
history sent, context, route forced, options; not the session history the run was given).
What a request with a key finds there (:func:`claim_keyed_run`):

- no run: it starts one (attempt 1).
- a run whose ``request_digest`` differs: :class:`IdempotencyConflict`; nothing runs.
- a run with a completed attempt: the run is resumed as :meth:`Agent.resume` resumes it (a
  new attempt under the same run id, with the recorded input): every step is served from
  the journal, so the answer, the routing and the events are the first run's, and no model
  or tool is called. That replay is strict: a step whose input differs from its record (the
  agent's instructions, tools or model changed since) raises
  :class:`~jeeves_router.errors.ReplayDivergence` instead of running live, so nothing runs twice.
- a run whose latest attempt never ended (no ``run.end``): :class:`RunInFlight` while it is
  in flight — this runtime is running it, or another process (another runtime) started it
  and the run's last entry is younger than ``in_flight_s``; else (its process died) it is
  resumed: its journaled steps are served and the rest runs live. A tool call started with
  no recorded outcome is never simply run again: the runtime's ``on_unknown_tool_outcome``
  decides (``"fail"`` by default).
- a run whose latest attempt was cut off by the process running it (cancelled, e.g. by its
  server's shutdown: a ``run.end`` of status ``cut``) or failed: resumed the same way at
  once, by any runtime (the failed step runs again).

Two requests with one key at once: each writes its ``run.start`` for the attempt after the
last one it read, and reads the run back; the first ``run.start`` of that attempt in journal
order wins, the other gets :class:`RunInFlight` (or :class:`IdempotencyConflict` when its
request differs) — unless the run had completed: then it takes the next attempt and replays
too (a replay calls nothing). One runtime never executes one run twice at once (its steps are
indexed by run id): a second request there gets :class:`RunInFlight`. A request without a
key never reads a recorded run: it runs under a new random run id, never of the ``k-`` form.

A key is scoped to its session: the same key sent with another ``session_id`` names another
run (the journal is read by session). Another process's attempt is judged by its entries'
clocks (``ts``), so the processes sharing a journal need roughly synchronised clocks.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from pydantic import TypeAdapter

from .._log import get_logger
from ..errors import RunError
from ..messages import Message
from .base import Journal
from .records import Entry, RunEndRecord, RunStartRecord
from .resume import CLAIM_TRIES, RecordedRuns, read_runs

__all__ = ["IdempotencyConflict", "KeyedStart", "RunInFlight", "claim_keyed_run", "is_owned", "log_refused"]

#: The served faces' logger (HTTP and the MCP ``ask`` tool): refused keys are logged there.
_served_log = get_logger("jeeves_router.serve")

_HISTORY = TypeAdapter(tuple[Message, ...])


class IdempotencyConflict(RunError):
    """The idempotency key was already used for another request (a different body); nothing was run.

    ``metadata`` holds the session and run ids. Asking again never helps: use a new key.
    """

    default_severity = "fatal"


class RunInFlight(RunError):
    """The run an idempotency key names is running now (here or in another process); nothing was run.

    Ask again later: a completed run then answers with its result. ``metadata`` holds the
    session and run ids.
    """

    default_severity = "retriable"


@dataclass(frozen=True, slots=True)
class KeyedStart:
    """The attempt a keyed request won.

    Attributes:
        attempt: The attempt number (1: a new run).
        completed: The run's last completed attempt (``None``: it never completed).
        history: Resuming a recorded run: the history it was recorded with (``None`` for a new run).
    """

    attempt: int
    completed: int | None
    history: tuple[Message, ...] | None


def is_owned(claim: str, owner: str) -> bool:
    """Whether ``claim`` was made by the runtime called ``owner`` (see :func:`claim_keyed_run`)."""
    return claim.startswith(owner + ".")


async def claim_keyed_run(
    journal: Journal,
    session_id: str,
    run_id: str,
    request_digest: str,
    new_start: Callable[[], Awaitable[RunStartRecord]],
    *,
    owner: str,
    running_here: bool,
    in_flight_s: float,
) -> KeyedStart:
    """Start, or take up again, the keyed run ``run_id`` (see the module docs).

    Args:
        journal: The journal.
        session_id: The run's session.
        run_id: The keyed run id.
        request_digest: The digest of the request as sent.
        new_start: Makes the ``run.start`` of a new run (called only when the run is new).
        owner: The id of the calling runtime; its claims start with ``owner + "."``.
        running_here: Whether the calling runtime is executing this run now.
        in_flight_s: Another process's unfinished attempt is in flight until the run has
            written nothing for this long.

    Raises:
        IdempotencyConflict: the run was requested with another request.
        RunInFlight: the run is in flight.
    """
    ids = {"session_id": session_id, "run_id": run_id}
    if running_here:  # one execution of a run per runtime: its steps are indexed by run id
        raise _in_flight(ids)
    entries = await journal.read(session_id, run_id=run_id)
    runs = RecordedRuns.of(entries)
    first = runs.first.get(run_id)
    latest = runs.attempts.get(run_id, 0)
    if first is None:
        start = await new_start()
    else:
        _same_request(first, request_digest, ids)
        ended = any(isinstance(e.record, RunEndRecord) and e.record.attempt == latest for e in entries)
        if run_id not in runs.completed and not ended:
            mine = is_owned(runs.claims.get((run_id, latest), ""), owner)
            if not mine and time.time() - max(e.ts for e in entries) < in_flight_s:
                raise _in_flight(ids)
        start = first
    for _ in range(CLAIM_TRIES):
        claim = f"{owner}.{uuid.uuid4().hex}"
        rec = start.model_copy(update={"attempt": latest + 1, "claim": claim, "request_digest": request_digest})
        await journal.append([Entry(session_id=session_id, run_id=run_id, record=rec)])
        runs = await read_runs(journal, session_id, run_id)
        winner = runs.claims.get((run_id, latest + 1), claim)  # the first run.start of that attempt
        if winner == claim:
            history = _HISTORY.validate_python(start.history) if first is not None else None
            return KeyedStart(latest + 1, runs.completed.get(run_id), history)
        _same_request(runs.first[run_id], request_digest, ids)
        if run_id not in runs.completed:  # another request of the key started it first: it is in flight
            raise _in_flight(ids)
        latest = runs.attempts[run_id]  # two replays of a completed run at once: take the next attempt
    raise _in_flight(ids)


def log_refused(error: RunError, reason: str, status: int | None = None, *, tool: str | None = None) -> None:
    """Log a refused idempotency key in one INFO line on ``jeeves_router.serve``: the run it names.

    Never the request, its headers or the key. Used by the HTTP server and the MCP ``ask`` tool.

    Args:
        error: The refusal (its ``metadata`` holds the session and run ids).
        reason: ``conflict``, ``in_flight`` or ``replay_diverged``.
        status: The HTTP status of the reply (``None`` over MCP).
        tool: The MCP tool that refused it (``None`` over HTTP).
    """
    ids = error.metadata
    where: dict[str, object] = {"status": status} if status is not None else {"tool": tool}
    _served_log.info(
        "idempotency key refused", reason=reason, **where, session_id=ids.get("session_id"), run_id=ids.get("run_id")
    )


def _same_request(rec: RunStartRecord, request_digest: str, ids: dict[str, str]) -> None:
    if rec.request_digest != request_digest:
        raise IdempotencyConflict(
            f"this idempotency key was used for another request (run {ids['run_id']!r} of session "
            f"{ids['session_id']!r}); nothing was run: send the same request again, or use a new key",
            metadata=ids,
        )


def _in_flight(ids: dict[str, str]) -> RunInFlight:
    return RunInFlight(
        f"the run of this idempotency key (run {ids['run_id']!r} of session {ids['session_id']!r}) is in flight; "
        "nothing was run: ask again later",
        metadata=ids,
    )
