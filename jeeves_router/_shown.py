"""The one rule for an exception's text leaving a run: ``Recovery(expose_details=...)``.

An exception's message may quote what it was handed: a provider's or a tool's output, a URL
with its API key, a customer's card number. So wherever the library shows an exception
outside the code that caught it — to a model (the tool result the calling model reads, the
reclassification and replan prompts), in the run's events (``tool.result``, ``run.failed``),
in the recovery report, in a journal — it shows its **type** only, unless the
:class:`~jeeves_router.recovery.Recovery` in force says ``expose_details=True``: then its
message too. The one in force is the run's own architecture's, else its parent run's (a
Router's reaches the specialists it runs), else none: not exposed.

Logs, served error replies and MCP results never carry the message, whatever the setting:
they name the type (the exception itself still reaches the code that called ``run()``).

It lives here, in the vocabulary layer, because a tool (a port) applies it as well as the
recovery report (:mod:`jeeves_router.recovery.report`) and the journal.
"""

from __future__ import annotations

__all__ = ["shown_error", "shown_message"]


def shown_message(error: BaseException, *, expose_details: bool, limit: int = 500) -> str:
    """The message of ``error`` as it may leave the run: ``""`` unless ``expose_details``.

    Shown, it is cut to ``limit`` characters (``...`` marks the cut). Never raises (an
    exception whose ``__str__`` fails is ``<unprintable Type>``).
    """
    if not expose_details:
        return ""
    try:
        text = str(error)
    except Exception:
        text = f"<unprintable {type(error).__name__}>"
    return text if len(text) <= limit else text[:limit] + "..."


def shown_error(error: BaseException, *, expose_details: bool, limit: int = 500) -> str:
    """``error`` as it may leave the run: ``"Type"``, or ``"Type: message"`` when ``expose_details``."""
    message = shown_message(error, expose_details=expose_details, limit=limit)
    name = type(error).__name__
    return f"{name}: {message}" if message else name
