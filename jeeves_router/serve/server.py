"""Run the app under uvicorn: loopback unless a token is set, graceful SIGTERM.

On SIGTERM (or Ctrl-C) uvicorn stops accepting connections, lets the runs in flight finish
for ``grace_s`` seconds, then cancels the rest (each cancelled run stops at its current
await point; what it journaled stays in the journal) and closes the journals.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping, Sequence
from typing import Any

import anyio

from .._articles import a_type
from .._targets import import_target
from ..agent import Agent
from ..errors import UsageError
from .app import create_app
from .guard import Drain, check_host, check_listen, is_loopback, token_from_env

__all__ = ["serve", "is_loopback", "load_agents", "token_from_env"]

#: uvicorn's own cancellation, should a cancelled run not end in time, comes this much later.
_BACKSTOP_S = 5


def load_agents(spec: str, *, option: str = "TARGET") -> Agent | Sequence[Agent] | Mapping[str, Agent]:
    """Import ``module:attr`` naming an agent, a list of agents or a mapping of them.

    A callable attribute is called with no arguments and must return one of those (see
    :func:`jeeves_router._targets.import_target`; the current directory is importable).
    ``option`` is what ``spec`` was given as, for the messages.
    """
    obj = import_target(spec, option=option, example="examples.serve_desk:desk")
    if not isinstance(obj, (Agent, Sequence, Mapping)):
        raise UsageError(f"{option} {spec!r} is {a_type(obj)}, not an Agent, a list or a mapping of agents")
    return obj


def serve(
    agents: Agent | Sequence[Agent] | Mapping[str, Agent],
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    token: str | None = None,
    grace_s: int = 30,
    log_level: str = "warning",
    **options: Any,
) -> None:
    """Serve ``agents`` over HTTP until SIGTERM/SIGINT (blocks).

    Args:
        agents: What :func:`~jeeves_router.serve.create_app` serves.
        host: Address to listen on; a non-loopback address needs ``token``.
        port: TCP port (0: any free port).
        token: Bearer token every request must carry.
        grace_s: On SIGTERM, how long runs in flight may take before they are cancelled.
        log_level: uvicorn's log level (access logs are off).
        **options: Passed to :func:`~jeeves_router.serve.create_app` (``journal``,
            ``max_concurrency``, ``max_request_bytes``, ...).

    Raises:
        UsageError: for a non-loopback host without a token, an address that cannot be listened
            on (a port in use or out of range), or bad options.
    """
    import uvicorn

    check_host(host, token, command="serve")
    check_listen(host, port)
    if not isinstance(grace_s, int) or grace_s < 0:
        raise UsageError(f"grace_s must be a whole number of seconds >= 0, got {grace_s!r}", argument="grace_s")
    drain = Drain()
    app = create_app(agents, token=token, drain=drain, **options)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=grace_s + _BACKSTOP_S,
        server_header=False,
    )

    class DrainingServer(uvicorn.Server):
        """uvicorn, cancelling the runs in flight itself once the grace period is over."""

        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            drain.start()
            async with anyio.create_task_group() as tg:

                async def cancel_late_runs() -> None:
                    await anyio.sleep(grace_s)
                    drain.cancel_all()

                tg.start_soon(cancel_late_runs)
                await super().shutdown(sockets)
                tg.cancel_scope.cancel()

    DrainingServer(config).run()
