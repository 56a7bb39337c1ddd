"""How a served run that ended without a result is told: its error reply, or the log line of a cut.

A run refused (its idempotency key) or failed gets an OpenAI-shaped error; a failed run's names
its error type only and says what the run had spent (``usage``). A run the server cut (its
client left, the server shut down) is told by one INFO line on ``jeeves_router.serve``: why,
and what it had spent (:func:`cut_spend`); a started stream a shutdown cuts also ends with a
failed run's error (:func:`cut_failure`), whose ``usage`` is that same spend.
"""

from __future__ import annotations

import logging
from typing import Any

from ..agent import Agent, RunStream
from ..errors import ReplayDivergence
from ..journal.keyed import IdempotencyConflict, RunInFlight, log_refused
from ..usage import Usage, spent_usage
from .wire import ApiError, usage_object

__all__ = ["cut_before_start", "cut_failure", "cut_spend", "failure", "log_cut", "refusal"]

log = logging.getLogger("jeeves_router.serve")


class _RunFailed(ApiError):
    """A run that failed: a 500 ``run_failed`` naming its error type, with what it had spent.

    ``spent`` (the failure's :func:`~jeeves_router.usage.spent_usage`: every request the run
    sent, failed ones included) is the error's ``usage`` member, in a completion's ``usage``
    shape; an extension of OpenAI's error object, which the ``openai`` SDK gives as
    ``APIStatusError.body["usage"]``.
    """

    def __init__(
        self,
        error_type: str,
        spent: Usage | None = None,
        *,
        status: int = 500,
        code: str = "run_failed",
        message: str | None = None,
    ) -> None:
        msg = message or f"the run failed ({error_type}); see the server log"
        super().__init__(status, msg, code=code, type="server_error")
        self.spent = spent

    def body(self) -> dict[str, Any]:
        """The error body, with ``usage`` when the run's spend is known."""
        out = super().body()
        if self.spent is not None:
            out["error"]["usage"] = usage_object(self.spent)
        return out


def failure(error_type: str, error: BaseException | None = None) -> ApiError:
    """The error of a run that failed with ``error`` (named ``error_type``), with its spend when ``error`` has one."""
    return _RunFailed(error_type, spent_usage(error) if error is not None else None)


def cut_failure(spent: Usage | None) -> ApiError:
    """The error that ends a started stream a shutdown cut: a failed run's (``ServerShutdown``), with ``spent``."""
    return _RunFailed("ServerShutdown", spent)


def cut_before_start(spent: Usage | None) -> ApiError:
    """The 503 of a run a shutdown cut before its reply started: a server error, with ``spent`` as ``usage``."""
    return _RunFailed(
        "ServerShutdown", spent, status=503, code="shutting_down", message="the server shut down before the run ended"
    )


def refusal(agent: Agent, error: BaseException | None, retry_after_s: int) -> ApiError:
    """The reply to a run that ended before its first event: a refused idempotency key, or a failure."""
    if isinstance(error, IdempotencyConflict):
        log_refused(error, "conflict", 422)
        msg = "the Idempotency-Key was already used for another request; send that request again, or use a new key"
        return ApiError(422, msg, param="Idempotency-Key", code="idempotency_key_conflict")
    if isinstance(error, ReplayDivergence):  # only a keyed replay replays strictly here
        log_refused(error, "replay_diverged", 422)
        msg = (
            "the run of this Idempotency-Key completed under an agent that has changed since (its instructions, "
            "tools or model), so its answer cannot be replayed; nothing was run: use a new key"
        )
        return ApiError(422, msg, param="Idempotency-Key", code="idempotency_key_replay_diverged")
    if isinstance(error, RunInFlight):
        log_refused(error, "in_flight", 409)
        return ApiError(
            409,
            f"the run of this Idempotency-Key is still in flight; retry after {retry_after_s} s for its result",
            param="Idempotency-Key",
            code="idempotency_key_in_flight",
            headers={"retry-after": str(retry_after_s)},
        )
    error_type = type(error).__name__
    log.warning("run failed", extra={"agent": agent.name, "error_type": error_type})
    return failure(error_type, error)


def cut_spend(run: RunStream, cut_off: list[Usage]) -> Usage:
    """What a run the server cut had spent: its requests and the ones the cut left waiting.

    The run's requests are :attr:`RunStream.spent`; those the cut left waiting for their
    answers (``cut_off``, from :func:`~jeeves_router.usage.cut_requests`) were sent: they
    count, their cost unknown. A journaled run's ``run.end`` ``cut`` record says the same
    (its ``usage``).
    """
    spent = run.spent
    for used in cut_off:
        spent = spent + used
    return spent


def log_cut(run: RunStream, reason: str, spent: Usage) -> None:
    """Log a run this server cut (INFO, ``run cut``): why, its session, and what it had spent (:func:`cut_spend`)."""
    log.info(
        "run cut: %s",
        reason.replace("_", " "),
        extra={
            "reason": reason,
            "session_id": run.session_id,
            "input_tokens": spent.input_tokens,
            "output_tokens": spent.output_tokens,
            "requests": spent.requests,
            "cost_usd": spent.cost_usd,
        },
    )
