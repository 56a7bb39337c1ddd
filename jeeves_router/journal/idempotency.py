"""Idempotency keys of tool calls, and what a resume does with a call whose outcome is unknown.

A function capability's call (an async function the Capabilities architecture calls) is a
call here as a tool's is (:func:`jeeves_router.runtime.is_call`): everything below applies to
it, its ``repeatable`` flag included; a skipped one's step answers with the sentence a
skipped tool call gives the model.

The keys are stable across replays, resumes, DBOS recoveries and forks. A ``tool.started`` entry
with no recorded result had an unknown outcome (the process died during the call), unless
a ``step.failed`` entry names its claim (the call raised: its outcome is known, and a retry
or a resume calls the tool again). A call that raised
:class:`~jeeves_router.errors.ToolOutcomeUnknown` (an MCP server that had the call, then
died or did not answer in time) is recorded without its claim: its outcome stays unknown,
as after a crash. On resume (or a retry of it in the same run, which a ``classify_error``
hook may ask for: the error is ``critical``, so the ladder alone never retries it),
``JournalRuntime(on_unknown_tool_outcome=...)`` decides what to do with an unknown one:

- ``"fail"`` (default): raise :class:`ToolOutcomeUnknown`; nothing is repeated.
- ``"retry"``: call the tool again with the same idempotency key.
- ``"skip"``: do not call it; the model is told the outcome is unknown (an error result, a
  :class:`~jeeves_router.ledger.SkippedCall`). The run's attempt ledger keeps it as a call
  made (it may have been): the step has effects (a replan stops, ``effects_done``; a repeat of
  the step is answered) and a retry's same call is answered with it, never made.

The same policy applies when two processes execute one run at once (a resume of a run
still in flight elsewhere): the first ``tool.started`` in the journal wins the call
(:func:`won_claim`), and the other process applies the policy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from .._log import get_logger
from ..ledger import SkippedCall
from ..runtime import current_idempotency_key, idempotency_scope
from .records import ToolOutcomeUnknown, ToolStartedRecord

if TYPE_CHECKING:
    from ..runtime import StepKey
    from .base import Journal

__all__ = ["UnknownToolPolicy", "current_idempotency_key", "idempotency_scope", "unknown_outcome", "won_claim"]

log = get_logger(__name__)

UnknownToolPolicy = Literal["fail", "retry", "skip"]


def unknown_outcome(
    policy: UnknownToolPolicy, key: StepKey, idem: str, *, elsewhere: bool = False, repeatable: bool = False
) -> SkippedCall | None:
    """Apply ``policy`` to a tool call whose outcome this process does not know.

    The call started before a crash (or in another process still making it) and never
    recorded its outcome, or (``elsewhere``) another process started the same call of the
    same run first (see :func:`won_claim`). A call of a ``repeatable`` tool (harmless to
    call twice, a read) that started before a crash is called again whatever the policy,
    as a framework retry calls it again: its outcome being unknown costs nothing.
    Returns the outcome to give the model (``"skip"``: a :class:`SkippedCall`), or ``None`` to call the tool
    (again) with the same idempotency key (``"retry"``, or ``repeatable``).

    Raises:
        ToolOutcomeUnknown: under ``"fail"``.
    """
    if repeatable and not elsewhere:
        log.info("repeatable tool's outcome unknown; calling it again", session_id=key.session_id, tool=key.name)
        return None
    log.warning(
        "tool outcome unknown",
        session_id=key.session_id,
        tool=key.name,
        step=key.index,
        policy=policy,
        elsewhere=elsewhere,
    )
    if policy == "fail":
        # A start with no outcome recorded is a crash's, or another process's still making the call.
        when = (
            "in another process (running or resuming the same run)"
            if elsewhere
            else "before a crash, or in another process still running it,"
        )
        raise ToolOutcomeUnknown(
            f"{key.name} (step {key.index} of session {key.session_id!r}, idempotency key {idem!r}) started "
            f"{when} and its outcome is unknown here; resume with on_unknown_tool_outcome='retry' to call "
            "it again or 'skip' to tell the model it is unknown",
            metadata={"tool": key.name, "step": key.index, "idempotency_key": idem},
        )
    if policy == "skip":  # an error result for the model; the run's ledger keeps it as a call made (it may have been)
        return SkippedCall(
            f"the outcome of this {key.name.split(':', 1)[-1]} call is unknown (interrupted); it was not repeated",
            is_error=True,
        )
    return None


async def won_claim(journal: Journal, key: StepKey, digest: str, claim: str, prior: ToolStartedRecord | None) -> bool:
    """Whether the ``tool.started`` entry with ``claim`` is the first for this call since ``prior``.

    Two processes may execute the same run at once (a ``resume`` of a run still in flight
    elsewhere, or two resumes of one crashed run). Each writes its ``tool.started`` entry,
    then reads the run's entries back: the journal's order decides, and only the first
    writer since the last start this process already knew of (``prior``) calls the tool.
    """
    started = [
        e.record
        for e in await journal.read(key.session_id, run_id=key.run_id, types=("tool.started",))
        if isinstance(e.record, ToolStartedRecord) and e.record.index == key.index and e.record.digest == digest
    ]
    if prior is not None:
        for i in range(len(started) - 1, -1, -1):
            if started[i].claim == prior.claim:
                started = started[i + 1 :]
                break
    return bool(started) and started[0].claim == claim
