"""Serve agents over HTTP: an OpenAI-compatible chat endpoint, run event streams, sessions.

Needs the ``serve`` extra (``pip install 'jeeves-router[serve]'``: Starlette and uvicorn).
From the shell: ``jeeves-router serve examples.serve_desk:desk --journal runs.db``.

Example:
    ``desk`` is any :class:`~jeeves_router.Agent`, such as the router desk of :mod:`jeeves_router`::

        import os

        from jeeves_router.serve import create_app, serve

        app = create_app(desk, journal="runs.db", token=os.environ["DESK_TOKEN"])  # for any ASGI server
        serve(desk, port=8000, journal="runs.db")  # or this: uvicorn, blocking
"""

try:
    import starlette  # noqa: F401
    import uvicorn  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        f"jeeves_router.serve needs the 'serve' extra: pip install 'jeeves-router[serve]' ({exc})"
    ) from exc

from ..journal.sessions import SessionHistory, Turn
from .app import create_app, served_agents
from .server import is_loopback, load_agents, serve, token_from_env
from .wire import ApiError

__all__ = [
    "ApiError",
    "SessionHistory",
    "Turn",
    "create_app",
    "is_loopback",
    "load_agents",
    "serve",
    "served_agents",
    "token_from_env",
]
