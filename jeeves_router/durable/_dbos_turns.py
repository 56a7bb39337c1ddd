"""Which turn of its session a DBOS workflow runs: an older turn run again is superseded.

A journal marks a run superseded (``RunContext.superseded``) when it is an older turn of its
session run again after a newer turn started (:func:`jeeves_router.journal.resume.newer_run_started`):
it then leaves the session's state alone (a sticky Router's session store keeps the newer
turn's agent). Under DBOS a turn is a workflow of :class:`~jeeves_router.durable.dbos.DurableAgents`
(its input names the session), a fork of it (``DBOS.fork_workflow``) is the same turn run again
(:func:`root_workflow`: the workflow the forks come from) and so is its recovery after a worker
died. :func:`superseded` tells the same as the journal: an execution that is not the turn's first
(a fork, or a recovery: its workflow had checkpointed steps before it started) of a turn older
than another turn's workflow of the same session (of the same workflow name, enqueued later).

The reads are made outside the workflow's DBOS context: in workflow code DBOS checkpoints a
status read as a step, so a recovered or forked run would read the first execution's answer
back, and every step after it would be numbered differently from the run's checkpoints.
"""

from __future__ import annotations

import asyncio
import contextvars
import datetime
from collections.abc import Callable, Coroutine, Sequence
from functools import partial
from typing import Any, TypeVar

from dbos import DBOS

__all__ = ["root_workflow", "superseded"]

T = TypeVar("T")

_ROOTS: dict[str, str] = {}  # workflow id -> the workflow it was forked from, first of the chain
_ROOTS_KEPT = 4096


async def root_workflow(workflow_id: str) -> str:
    """The workflow ``workflow_id`` was forked from, following forks of forks (itself when it is no fork).

    Asked from inside a step or outside the workflow's context (DBOS does not checkpoint a status
    read there), once per workflow and process.
    """
    root = _ROOTS.get(workflow_id)
    if root is not None:
        return root
    root, seen = workflow_id, {workflow_id}
    while True:
        status = await DBOS.get_workflow_status_async(root)
        parent = status.forked_from if status is not None else None
        if not parent or parent in seen:
            break
        root = parent
        seen.add(root)
    if len(_ROOTS) >= _ROOTS_KEPT:
        _ROOTS.clear()
    _ROOTS[workflow_id] = root
    return root


async def superseded(session_id: str) -> bool:
    """Whether this execution of the current workflow is an older turn of ``session_id`` run again (module docs).

    ``False`` outside a workflow, and for a workflow whose input names no session (not one of
    ``DurableAgents``): nothing tells its turns apart.
    """
    workflow_id = DBOS.workflow_id
    if workflow_id is None:
        return False
    return await _unrecorded(partial(_newer_turn_started, workflow_id, session_id))


async def _newer_turn_started(workflow_id: str, session_id: str) -> bool:
    status = await DBOS.get_workflow_status_async(workflow_id)
    if status is None:
        return False
    if status.forked_from is None and not await DBOS.list_workflow_steps_async(workflow_id):
        return False  # the turn's first execution: it was the newest turn when it was enqueued
    root_id = await root_workflow(workflow_id)
    root = status if root_id == workflow_id else await DBOS.get_workflow_status_async(root_id)
    if root is None or root.created_at is None:
        return False
    since = datetime.datetime.fromtimestamp(root.created_at / 1000, tz=datetime.timezone.utc).isoformat()
    later = await DBOS.list_workflows_async(name=status.name, start_time=since, is_fork=False, load_output=False)
    return any(
        w.workflow_id != root_id and (w.created_at or 0) > root.created_at and _session_of(w.input) == session_id
        for w in later
    )


def _session_of(inputs: Any) -> str | None:
    """The session a ``DurableAgents`` workflow runs, from its input (``agent, prompt, session_id, ...``)."""
    if not isinstance(inputs, dict):
        return None
    args: Sequence[Any] = inputs.get("args") or ()
    kwargs: dict[str, Any] = inputs.get("kwargs") or {}
    found = args[2] if len(args) > 2 else kwargs.get("session_id")
    return found if isinstance(found, str) else None


async def _unrecorded(fn: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Await ``fn()`` in a task without the workflow's DBOS context: its DBOS reads are not checkpointed.

    The task is cancelled with its caller.
    """
    loop = asyncio.get_running_loop()
    task: asyncio.Task[T] = contextvars.Context().run(loop.create_task, fn())
    return await task
