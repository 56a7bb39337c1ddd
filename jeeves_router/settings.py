"""Process-wide switches.

Real model calls can be blocked (the project's tests do this): a blocked adapter refuses
any request whose endpoint is not on the loopback interface, so tests may still talk to a
server of their own on 127.0.0.1. Set ``JEEVES_BLOCK_REAL_MODELS=1`` or call
:func:`block_real_model_calls`. In-process models (``LlamaCppModel``) are local, like a
loopback server, and are never blocked.
"""

from __future__ import annotations

import os
from urllib.parse import urlparse

from .errors import RealModelCallBlocked

__all__ = ["block_real_model_calls", "real_model_calls_blocked", "check_real_call_allowed"]

_blocked: bool | None = None
_LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}


def block_real_model_calls(blocked: bool = True) -> None:
    """Block (or allow again) model calls to anything but loopback addresses."""
    global _blocked
    _blocked = blocked


def real_model_calls_blocked() -> bool:
    """Whether real model calls are blocked (the switch, else the environment)."""
    if _blocked is not None:
        return _blocked
    return os.environ.get("JEEVES_BLOCK_REAL_MODELS", "").lower() in ("1", "true", "yes")


def check_real_call_allowed(provider: str, base_url: str | None) -> None:
    """Raise :class:`RealModelCallBlocked` if calls are blocked and ``base_url`` is not loopback.

    Args:
        provider: For the message, e.g. ``"openai"``.
        base_url: The endpoint the call would go to; ``None`` means the provider's default.
    """
    if not real_model_calls_blocked():
        return
    host = urlparse(base_url).hostname if base_url else None
    if host is None or host not in _LOOPBACK:
        raise RealModelCallBlocked(
            f"real {provider} model call to {host or 'the default endpoint'} blocked: real model calls are "
            "disabled (tests); use jeeves_router.testing.ScriptedModel or a loopback server"
        )
