"""Durable routed runs on DBOS over PostgreSQL (the optional extra ``jeeves-router[dbos]``).

A run becomes a DBOS workflow; its classification, model calls and tool calls are DBOS
steps, checkpointed in DBOS's system database as JSON. When a worker process dies, DBOS
recovers its pending workflows (when the same ``executor_id`` starts again, or through
DBOS's recovery API from another worker): completed steps return their checkpointed
results — no model call or tool call that completed is repeated — and the run goes on
from the first step that had not completed.

Runs are spread over worker processes (on any number of machines) by a DBOS queue that
lives in the shared PostgreSQL database::

    desk = Agent(..., architecture=Router(...), runtime=DBOSRuntime())
    durable = DurableAgents([desk])                  # before DBOS.launch(), in every process
    DBOS(config=dbos_config("support", pg_url, executor_id="worker-1"))
    DBOS.launch()
    await durable.register_queue(worker_concurrency=8)

    client = dbos_client(pg_url)                     # anywhere else
    wid = await enqueue_run(client, "I was charged twice", agent="desk", session_id="s-42")
    result = await run_result(client, wid)

Notes:
    - Async workflows run on asyncio (DBOS does not support trio).
    - A model call is one step: its text deltas reach a stream consumer when the step
      completes, not token by token.
    - A tool call is two DBOS steps: a ``<name>.started`` mark, then the call. A recovered
      run that finds the mark but no checkpointed call (the worker died during the call) does
      not call the tool again by default: ``DBOSRuntime(on_unknown_tool_outcome=...)`` decides,
      as for a journal's resume (``"fail"``, ``"retry"`` with the same
      :func:`~jeeves_router.journal.current_idempotency_key`, or ``"skip"``); a ``repeatable``
      tool's call is made again whatever the policy. A tool call's key
      names the workflow, the step and its input; a fork of the workflow (``DBOS.fork_workflow``)
      that makes the call again gives it the original's key, so a keyed effect happens once.
    - A failed step is checkpointed as its failure, followed by a ``<name>.judged`` step with the
      recovery ladders' judgement of it (a ``classify_error`` hook's answer): a recovered run
      decides on the failure as the run did, without asking the hook again
      (:mod:`jeeves_router.durable._dbos_judged`).
    - Where ``Recovery(time_limit_s=...)`` stopped the run — before an attempt, during one (the
      time box cut a call off) or after a failure — is checkpointed as a ``<limit key>.limit`` step
      (one per stop, none per attempt) through the runtime port a journal also implements
      (``record_limit``/``recorded_limit``): a recovered or forked run that replays past it stops
      there too, with the usage the run counted (a cut call's request included), and does not
      make the call again (:mod:`jeeves_router.durable._dbos_limits`).
    - Otherwise the limit is the execution's: a recovered or forked run measures it from its own
      start (a dead worker's downtime is not spent from it), as a journal's resume of an
      unfinished run does. DBOS's workflow timeout (``workflow_timeout`` when enqueuing,
      ``SetWorkflowTimeout``) is the deadline DBOS keeps across executions.
    - A fork or a recovery of a turn's workflow after a later turn of its session was enqueued is an
      older turn run again: as a journal's resume of an earlier run, it leaves the session's state
      (a sticky Router's agent) to the newer turn (:mod:`jeeves_router.durable._dbos_turns`).
    - Workflow code must be deterministic: a recovered run that asks for a step whose
      input digest differs from the checkpointed one raises ``ReplayDivergence``.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from pydantic import TypeAdapter

from ..errors import UsageError
from ..journal.records import jsonable_mapping, to_json
from ..messages import Message
from ..results import RunResult

try:
    from dbos import DBOS, DBOSClient, SetWorkflowID
    from dbos._serialization import DBOSPortableJSONSerializer
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("jeeves_router.durable.dbos needs DBOS: pip install 'jeeves-router[dbos]'") from exc

from ._dbos_errors import kept_error, run_errors
from ._dbos_runtime import DBOSRuntime

if TYPE_CHECKING:
    from dbos import DBOSConfig

    from ..agent import Agent

__all__ = [
    "APPLICATION_VERSION",
    "DEFAULT_QUEUE",
    "WORKFLOW_NAME",
    "DBOSRuntime",
    "DurableAgents",
    "dbos_client",
    "dbos_config",
    "enqueue_run",
    "run_result",
]

DEFAULT_QUEUE = "jeeves-runs"
#: The default ``application_version``: "2" since time-limit stops are ``.limit`` steps (no longer
#: a field of ``.judged``), so runs checkpointed as "1" are left to workers of the older code.
APPLICATION_VERSION = "2"
WORKFLOW_NAME = "jeeves_router.run"
_RESULT = TypeAdapter(RunResult)
_HISTORY = TypeAdapter(tuple[Message, ...])


def _serializer() -> DBOSPortableJSONSerializer:
    return DBOSPortableJSONSerializer()


@functools.cache  # asked once per process: neither DBOS nor SQLite changes while it runs
def _sqlite_timestamps_work() -> bool:
    """Whether DBOS's SQLite system database can stamp its rows with this Python's SQLite.

    DBOS (3.4) writes its rows' times with ``unixepoch('subsec')`` on Python 3.12 and later,
    which SQLite learned in 3.42; with an older SQLite (Debian 12 ships 3.40) the expression is
    NULL and the first enqueue fails with ``NOT NULL constraint failed``. Asked of SQLite
    itself, so a DBOS that changes the expression is judged by what it writes.
    """
    import sqlite3

    try:
        from dbos._migration import get_sqlite_timestamp_expr
    except ImportError:  # another DBOS layout: nothing to check
        return True
    conn = sqlite3.connect(":memory:")
    try:
        return bool(conn.execute(f"SELECT {get_sqlite_timestamp_expr()} IS NOT NULL").fetchone()[0])
    except sqlite3.Error:
        return False
    finally:
        conn.close()


def _check_system_database(url: str) -> None:
    if url.startswith("sqlite") and not _sqlite_timestamps_work():
        import sqlite3
        import sys

        raise UsageError(
            f"DBOS cannot keep its system database in SQLite {sqlite3.sqlite_version} on Python "
            f"{sys.version_info[0]}.{sys.version_info[1]}: it stamps rows with unixepoch('subsec'), which needs "
            "SQLite 3.42 or later; use a PostgreSQL system database (postgresql://...) or a Python linked "
            "against a newer SQLite"
        )


def dbos_config(
    name: str,
    database_url: str,
    *,
    executor_id: str,
    application_version: str = APPLICATION_VERSION,
    **extra: Any,
) -> DBOSConfig:
    """A DBOS configuration for a jeeves worker: JSON checkpoints, explicit executor id.

    Args:
        name: The DBOS application name (the same in every worker of the application).
        database_url: The shared PostgreSQL system database, e.g.
            ``postgresql://user:pass@db-host:5432/jeeves`` (or ``sqlite:///file.db`` for
            one machine).
        executor_id: This worker's unique, stable id: a restarted worker with the same id
            recovers the runs it was executing.
        application_version: Workers recover only runs started by the same version. The
            default, :data:`APPLICATION_VERSION`, changes with the shape of jeeves's
            checkpoints, so a worker does not recover a run checkpointed by an older one.
        extra: Other ``DBOSConfig`` keys.

    Raises:
        UsageError: For a SQLite system database that DBOS cannot write with this Python's
            SQLite (DBOS needs SQLite 3.42 or later on Python 3.12 and later).
    """
    _check_system_database(database_url)
    config: dict[str, Any] = {
        "name": name,
        "system_database_url": database_url,
        "executor_id": executor_id,
        "application_version": application_version,
        "serializer": _serializer(),
        **extra,
    }
    return config  # type: ignore[return-value]


def dbos_client(database_url: str, **kwargs: Any) -> DBOSClient:
    """A ``DBOSClient`` (enqueue runs, read results) speaking the workers' JSON format.

    The system database schema must exist (``dbos migrate`` or one launched worker).
    """
    _check_system_database(database_url)
    return DBOSClient(system_database_url=database_url, serializer=_serializer(), **kwargs)


class DurableAgents:
    """Agents served as one DBOS workflow, fed by a DBOS queue.

    Create it at import time in every process (workers and, if they enqueue with
    :meth:`enqueue`, clients), before ``DBOS.launch()``; every root agent must use a
    :class:`DBOSRuntime`.

    Args:
        agents: The root agents, by their unique names.
        queue: The DBOS queue runs are enqueued on.
        workflow_name: The registered workflow's name (the same in every process).
    """

    def __init__(
        self, agents: Sequence[Agent], *, queue: str = DEFAULT_QUEUE, workflow_name: str = WORKFLOW_NAME
    ) -> None:
        self.agents: dict[str, Agent] = {}
        for agent in agents:
            if not isinstance(agent.runtime, DBOSRuntime):
                raise UsageError(
                    f"agent {agent.name!r} must be built with runtime=DBOSRuntime() to run as a DBOS workflow"
                )
            if agent.name in self.agents:
                raise UsageError(f"two agents are named {agent.name!r}; DurableAgents finds agents by name")
            self.agents[agent.name] = agent
        if not self.agents:
            raise UsageError("DurableAgents needs at least one agent")
        self.queue = queue
        self.workflow_name = workflow_name

        async def run_agent(
            agent: str,
            prompt: str,
            session_id: str,
            history: list[Any],
            context: dict[str, Any],
            force_route: str | None,
        ) -> dict[str, Any]:
            found = self.agents.get(agent)
            if found is None:
                raise UsageError(f"no agent named {agent!r} in this worker; known: {', '.join(self.agents)}")
            try:
                result = await found.run(
                    prompt,
                    session_id=session_id,
                    history=_HISTORY.validate_python(history),
                    context=context,
                    force_route=force_route,
                )
            except Exception as exc:  # DBOS keeps what the workflow raises: its type, its message as shown
                raise kept_error(exc) from None
            data: dict[str, Any] = _RESULT.dump_python(result, mode="json")
            return data

        run_agent.__qualname__ = run_agent.__name__ = workflow_name.replace(".", "_")
        self.workflow = DBOS.workflow(name=workflow_name)(run_agent)

    async def register_queue(
        self,
        *,
        worker_concurrency: int | None = None,
        global_concurrency: int | None = None,
        polling_interval_sec: float = 1.0,
    ) -> None:
        """Declare the queue (after ``DBOS.launch()``); this worker then serves it."""
        await DBOS.register_queue_async(
            self.queue,
            worker_concurrency=worker_concurrency,
            global_concurrency=global_concurrency,
            polling_interval_sec=polling_interval_sec,
        )

    async def enqueue(
        self,
        prompt: str,
        *,
        agent: str | None = None,
        session_id: str | None = None,
        history: Sequence[Message] = (),
        context: Mapping[str, Any] | None = None,
        force_route: str | None = None,
        workflow_id: str | None = None,
    ) -> str:
        """Enqueue one run from a launched DBOS process; returns its workflow id."""
        args = _run_args(self.agents, prompt, agent, session_id, history, context, force_route)
        wid = workflow_id or f"jeeves-{uuid.uuid4().hex}"
        with SetWorkflowID(wid):
            handle: Any = await DBOS.enqueue_workflow_async(self.queue, self.workflow, *args)
        return str(handle.workflow_id)

    async def result(self, workflow_id: str) -> RunResult:
        """Wait for the run ``workflow_id`` and return its result (a failed run raises as in :func:`run_result`)."""
        handle: Any = await DBOS.retrieve_workflow_async(workflow_id)
        with run_errors():
            data = await handle.get_result()
        return _RESULT.validate_python(data)


def _run_args(
    agents: Mapping[str, Agent] | None,
    prompt: str,
    agent: str | None,
    session_id: str | None,
    history: Sequence[Message],
    context: Mapping[str, Any] | None,
    force_route: str | None,
) -> tuple[Any, ...]:
    if agent is None:
        if agents is None or len(agents) != 1:
            raise UsageError("name the agent to run: agent='desk'")
        agent = next(iter(agents))
    if not isinstance(prompt, str):
        raise UsageError(f"prompt must be a string, got {type(prompt).__name__}")
    return (
        agent,
        prompt,
        session_id or uuid.uuid4().hex,
        to_json(tuple(history)),
        jsonable_mapping(context or {}, what="context"),
        force_route,
    )


async def enqueue_run(
    client: DBOSClient,
    prompt: str,
    *,
    agent: str,
    session_id: str | None = None,
    history: Sequence[Message] = (),
    context: Mapping[str, Any] | None = None,
    force_route: str | None = None,
    workflow_id: str | None = None,
    queue: str = DEFAULT_QUEUE,
    workflow_name: str = WORKFLOW_NAME,
) -> str:
    """Enqueue one run from any process through a :func:`dbos_client`; returns its workflow id.

    Giving ``workflow_id`` makes the enqueue idempotent: the same id is one run.
    """
    args = _run_args(None, prompt, agent, session_id, history, context, force_route)
    wid = workflow_id or f"jeeves-{uuid.uuid4().hex}"
    handle: Any = await client.enqueue_async(
        {"queue_name": queue, "workflow_name": workflow_name, "workflow_id": wid}, *args
    )
    return str(handle.get_workflow_id())


async def run_result(client: DBOSClient, workflow_id: str) -> RunResult:
    """Wait for the run ``workflow_id`` (enqueued anywhere) and return its result.

    Raises:
        JeevesError: A run that failed raises its error again, of its own type when it is
            one of :mod:`jeeves_router.errors` (e.g. ``ToolOutcomeUnknown``), with its
            message; DBOS keeps only the name and message, which other types come back with
            in DBOS's ``PortableWorkflowError``. The message is kept (in DBOS's database, so
            here) only under ``Recovery(expose_details=True)`` or for a ``ToolError``; else the
            message names the type and that setting, not a secret the message may quote.
    """
    handle: Any = await anyio.to_thread.run_sync(client.retrieve_workflow, workflow_id)
    with run_errors():
        data = await anyio.to_thread.run_sync(handle.get_result)
    return _RESULT.validate_python(data)
