"""How the MCP ``ask`` tool runs its agent: the run's result and the text of its reply.

A keyed run (an ``idempotency_key``) goes on in the server's task group when its call is
cancelled (:func:`outliving`): a client that timed out calls again and gets that run's answer,
where a run cut mid-call would leave an unknown outcome that fails every retry.
"""

from __future__ import annotations

import anyio
import anyio.abc

from ..agent import Agent
from ..journal.keyed import RunInFlight
from ..reply import ReplyText
from ..results import RunResult

__all__ = ["outliving", "replied"]


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


async def outliving(
    host: anyio.abc.TaskGroup, agent: Agent, request: str, session_id: str | None, key: str
) -> tuple[RunResult, str | None]:
    """The keyed run's result and reply; the run goes on in ``host`` if this wait is cancelled (its retry gets it)."""
    done = anyio.Event()
    outcome: list[tuple[RunResult, str | None] | Exception] = []

    async def run() -> None:
        try:
            outcome.append(await replied(agent, request, session_id, key))
        except Exception as exc:  # raised again to the caller, if it still waits
            outcome.append(exc)
        finally:
            done.set()

    host.start_soon(run)
    await done.wait()
    if not outcome:  # the server stopped under it
        raise RunInFlight("the server stopped while the run was in flight; call again", metadata={})
    if isinstance(outcome[0], Exception):
        raise outcome[0]
    return outcome[0]
