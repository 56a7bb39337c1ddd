"""How the MCP ``ask`` tool runs its agent: the run's result and the text of its reply.

A keyed run (an ``idempotency_key``) goes on in the server's task group when its call is
cancelled (:func:`outliving`): a client that timed out calls again and gets that run's answer,
where a run cut mid-call would leave an unknown outcome that fails every retry. A run holds its
slot of the server's concurrency limit (:class:`jeeves_router._slots.Slots`) for as long as it
runs (:func:`asked`): a keyed run that outlives its call keeps it to its end, as over HTTP.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio
import anyio.abc

from ..agent import Agent
from ..journal.keyed import RunInFlight
from ..reply import ReplyText
from ..results import RunResult

__all__ = ["asked", "outliving", "replied"]


async def replied(agent: Agent, request: str, session_id: str | None, key: str | None) -> tuple[RunResult, str | None]:
    """Run ``agent`` as ``agent.run`` does: its result, and the text of its reply (:class:`ReplyText`).

    Raises what ``agent.run`` raises (the run's own exception after its ``run.failed``).
    """
    reply = ReplyText()
    async with agent.stream(request, session_id=session_id, idempotency_key=key) as stream:
        async for ev in stream:
            reply.feed(ev)
    result = stream.result
    if result is None:  # pragma: no cover - a stream consumed to its end without raising has a result
        raise RuntimeError("the run ended without a result")
    reply.end(result)
    return result, reply.text


async def asked(
    host: anyio.abc.TaskGroup | None,
    agent: Agent,
    request: str,
    session_id: str | None,
    key: str | None,
    release: Callable[[], None],
) -> tuple[RunResult, str | None]:
    """The run of one ``ask`` (its slot taken), calling ``release`` once the run is over.

    A keyed run goes on in ``host`` (the server's task group, when it has one) if the call is
    cancelled, and keeps its slot until it ends (:func:`outliving`); any other run gives its
    slot back when the call ends, however it ends.
    """
    if key is not None and host is not None:
        return await outliving(host, agent, request, session_id, key, release)
    try:
        return await replied(agent, request, session_id, key)
    finally:
        release()


async def outliving(
    host: anyio.abc.TaskGroup,
    agent: Agent,
    request: str,
    session_id: str | None,
    key: str,
    release: Callable[[], None] = lambda: None,
) -> tuple[RunResult, str | None]:
    """The keyed run's result and reply; the run goes on in ``host`` if this wait is cancelled (its retry gets it).

    ``release`` is called when the run is over (not when this wait is cancelled).
    """
    done = anyio.Event()
    outcome: list[tuple[RunResult, str | None] | Exception] = []

    async def run() -> None:
        try:
            outcome.append(await replied(agent, request, session_id, key))
        except Exception as exc:  # raised again to the caller, if it still waits
            outcome.append(exc)
        finally:
            release()
            done.set()

    try:
        host.start_soon(run)
    except BaseException:  # the run never started: its slot is not held
        release()
        raise
    await done.wait()
    if not outcome:  # the server stopped under it
        raise RunInFlight("the server stopped while the run was in flight; call again", metadata={})
    if isinstance(outcome[0], Exception):
        raise outcome[0]
    return outcome[0]
