"""Library logging: the standard :mod:`logging` module, silent unless the application opts in.

Every module logs through ``get_logger(__name__)``: a thin wrapper over
:func:`logging.getLogger` that takes an event name and keyword fields, the way the call
sites read (``log.warning("model.retry", model=..., attempt=2)``). Nothing is formatted
unless the level is enabled, and the package logger ``jeeves_router`` carries a
:class:`logging.NullHandler`, so a program that does not configure logging sees nothing
(not even warnings through :data:`logging.lastResort`).

The fields go out twice: rendered in the message (``model.retry model='x' attempt=2``) for
plain handlers, and as ``record.fields`` (a dict) for structured handlers. Field values
that look like secrets are masked in both: any field whose name mentions a key, token,
secret, password or authorization, and any text that looks like a provider API key or a
bearer token.

To see the library's logs::

    import logging
    logging.basicConfig(level=logging.INFO)                 # everything at INFO and above
    logging.getLogger("jeeves_router").setLevel(logging.DEBUG)   # or only this library
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from typing import Any

__all__ = ["Logger", "get_logger", "redact"]

logging.getLogger("jeeves_router").addHandler(logging.NullHandler())

_SECRET_NAME = re.compile(r"api_?key|authorization|secret|password|passwd|bearer|credential|token$", re.I)
_KEY_PATTERN = re.compile(r"(sk-(?:ant-)?[A-Za-z0-9_\-]{4})[A-Za-z0-9_\-]{4,}")
_BEARER_PATTERN = re.compile(r"(?i)(bearer\s+)\S+")
MASK = "***"


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with the given secrets and anything shaped like an API key or bearer token masked."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, MASK)
    text = _KEY_PATTERN.sub(r"\1***", text)
    return _BEARER_PATTERN.sub(r"\1***", text)


def _clean(name: str, value: Any) -> Any:
    if _SECRET_NAME.search(name):
        return MASK
    if isinstance(value, str):
        return redact(value)
    return value


class Logger:
    """Logs ``event key=value ...`` lines to one stdlib logger; see the module docs."""

    __slots__ = ("_logger",)

    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger

    def _log(self, level: int, event: str, fields: dict[str, Any]) -> None:
        if not self._logger.isEnabledFor(level):
            return
        clean = {k: _clean(k, v) for k, v in fields.items()}
        rendered = " ".join(f"{k}={v!r}" for k, v in clean.items())
        message = redact(f"{event} {rendered}" if rendered else event)
        self._logger.log(level, "%s", message, extra={"event": event, "fields": clean}, stacklevel=3)

    def debug(self, event: str, **fields: Any) -> None:
        """Log at DEBUG."""
        self._log(logging.DEBUG, event, fields)

    def info(self, event: str, **fields: Any) -> None:
        """Log at INFO."""
        self._log(logging.INFO, event, fields)

    def warning(self, event: str, **fields: Any) -> None:
        """Log at WARNING."""
        self._log(logging.WARNING, event, fields)

    def error(self, event: str, **fields: Any) -> None:
        """Log at ERROR."""
        self._log(logging.ERROR, event, fields)


def get_logger(name: str) -> Logger:
    """The logger for module ``name`` (pass ``__name__``)."""
    return Logger(logging.getLogger(name))
