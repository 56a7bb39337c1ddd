"""The parts of one capability step besides its loop: session id, prompt, closing event.

:meth:`Capabilities.execute <.architecture.Capabilities.execute>` runs a step under the
recovery ladder; these build what it hands to the capability and what it emits.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from ...events import CapabilityCompleted
from ...ids import _MAX_NAME, child_session_id  # the longest route name child_session_id takes
from ..base import RunContext
from .capability import Capability

__all__ = ["completed", "step_prompt", "step_session_id"]


def step_session_id(ctx: RunContext, cap: Capability, index: int) -> str:
    """The session id of step ``index`` (1-based, unique within the run) of capability ``cap``.

    The step number makes it unique: a capability that runs twice in one plan gets two
    sessions, so the ledger (and a journal) never answers the second step's tool calls and
    model turns with the first's. A name too long to take the suffix within the 48
    characters a route name may have is shortened (the suffix, not the name, makes it unique).
    """
    suffix = f"-{index}"
    name = cap.name[: _MAX_NAME - len(suffix)].rstrip("-_")
    return child_session_id(ctx.session_id, f"{name}{suffix}")


def step_prompt(task: str, objective: str, done: Sequence[tuple[str, str]]) -> str:
    """The prompt of a capability agent's step: its task, the overall request, the results so far."""
    parts = [task]
    if objective and objective != task:
        parts.append(f"Overall request: {objective}")
    if done:
        parts.append("Results so far:\n" + "\n".join(f"- {c}: {t}" for c, t in done))
    return "\n\n".join(parts)


def completed(
    ctx: RunContext, name: str, started: float, index: int, *, ok: bool, from_ledger: bool = False
) -> CapabilityCompleted:
    """The event that closes one attempt of capability ``name`` (step ``index``), begun at ``started``.

    ``from_ledger``: the ledger answered the step's call (a retry's, of a function capability): it did not run.
    """
    return CapabilityCompleted(
        session_id=ctx.session_id,
        path=ctx.path,
        capability=name,
        duration_s=time.monotonic() - started,
        ok=ok,
        step=index,
        from_ledger=from_ledger,
    )
