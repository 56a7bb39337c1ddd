"""Capability selection: one few-shot yes/no model call per capability, under a semaphore.

Always-active capabilities are taken first and never asked about. The others are asked
in parallel, at most ``max_concurrent`` calls at once; each task only stores its answer
(events are emitted by the caller afterwards, never from inside the task group). A call
that fails or whose reply has no clear yes/no is logged and the capability skipped — unless
its failure is FATAL, which aborts the run, or every call failed and no capability is
always active: the first call's failure is then raised, for the recovery ladder to judge.
Then ``requires`` are expanded transitively: a required context type that the run's context
does not hold and no chosen capability provides pulls in the first registered capability
that provides it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from ..._log import get_logger
from ...messages import user
from ...models.base import Model, ModelRequest
from ...recovery.classify import default_classification, mark_fatal
from ...recovery.severity import ErrorSeverity
from ...runtime import StepKey
from ...usage import NO_USAGE, Usage, spent_usage

if TYPE_CHECKING:
    from ..base import RunContext
    from .capability import Capability

__all__ = ["Selection", "selection_prompt", "parse_yes_no", "select_capabilities", "expand_requirements"]

log = get_logger(__name__)

_YES_NO = re.compile(r"\b(yes|no|true|false)\b", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Selection:
    """The outcome of selection.

    Attributes:
        chosen: Selected capability names, in registration order.
        always_active: The always-active ones among them.
        skipped: Capabilities whose classification failed.
        added: Capabilities added to satisfy ``requires``.
        usage: Model usage of the classification calls.
    """

    chosen: tuple[str, ...]
    always_active: tuple[str, ...]
    skipped: tuple[str, ...]
    added: tuple[str, ...]
    usage: Usage


def selection_prompt(cap: Capability) -> str:
    """The system prompt of ``cap``'s yes/no call; examples in their declared order."""
    lines = [
        "You decide whether one capability is needed to complete a task.",
        'Answer "yes" or "no" on the first line, then give a one-sentence reason.',
        "",
        f"Capability: {cap.name}",
    ]
    if cap.description:
        lines.append(f"What it does: {cap.description}")
    if cap.guide is not None:
        lines.append(cap.guide.instructions)
        if cap.guide.examples:
            lines += ["", "Examples:"]
            for ex in cap.guide.examples:
                lines.append(f"Task: {ex.query}\nAnswer: {'yes' if ex.result else 'no'}")
                if ex.reason:
                    lines.append(f"Reason: {ex.reason}")
    return "\n".join(lines)


def parse_yes_no(text: str) -> bool | None:
    """The first yes/no/true/false word of ``text`` as a bool, or ``None``."""
    m = _YES_NO.search(text or "")
    if m is None:
        return None
    return m.group(1).lower() in ("yes", "true")


def expand_requirements(
    chosen: Sequence[str], capabilities: Sequence[Capability], context: Mapping[str, Any], excluded: Sequence[str] = ()
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Add providers of missing required types, transitively; returns (all, added)."""
    by_name = {c.name: c for c in capabilities}
    result = list(chosen)
    added: list[str] = []
    todo = list(chosen)
    while todo:
        cap = by_name[todo.pop(0)]
        for needed in cap.requires:
            if needed in context or any(needed in by_name[n].provides for n in result):
                continue
            provider = next((c for c in capabilities if needed in c.provides and c.name not in excluded), None)
            if provider is None:
                log.warning("no capability provides a required type", capability=cap.name, requires=needed)
                continue
            result.append(provider.name)
            added.append(provider.name)
            todo.append(provider.name)
    order = {c.name: i for i, c in enumerate(capabilities)}
    return tuple(sorted(result, key=order.__getitem__)), tuple(added)


async def select_capabilities(
    ctx: RunContext,
    capabilities: Sequence[Capability],
    *,
    task: str,
    model: Model,
    max_concurrent: int,
    excluded: Sequence[str] = (),
    feedback: str | None = None,
    bypass: bool = False,
    lost: Callable[[Usage], None] | None = None,
) -> Selection:
    """Choose the capabilities for ``task`` (see the module docstring).

    ``lost`` is given what the classification calls spent (failed ones' requests included)
    when the selection itself fails: a successful one reports it in :attr:`Selection.usage`.
    """
    active = [c for c in capabilities if c.name not in excluded]
    always = tuple(c.name for c in active if c.always_active)
    if bypass:
        return Selection(tuple(c.name for c in active), always, (), (), Usage())
    ask = [c for c in active if not c.always_active]
    # Keys are taken in registration order before any task starts: replay stays deterministic.
    keys = [ctx.next_key(f"select:{c.name}") for c in ask]
    answers: dict[str, bool | None] = {}
    errors: dict[str, BaseException] = {}
    usages: list[Usage] = []
    limiter = anyio.Semaphore(max_concurrent)
    text = task if not feedback else f"{task}\n\nNote: {feedback}"

    async def one(cap: Capability, key: StepKey) -> None:
        async with limiter:
            request = ModelRequest(
                messages=(user(f"Task: {text}"),),
                system=selection_prompt(cap),
                temperature=0.0,
                max_tokens=64,
                purpose="classify",
            )
            try:
                response = await ctx.runtime.step(
                    key, {"capability": cap.name, "task": text}, lambda: model.request(request)
                )
            except Exception as exc:
                errors[cap.name] = exc
                usages.append(spent_usage(exc) or NO_USAGE)  # a failed call's requests count too
                return
            usages.append(response.usage)
            answers[cap.name] = parse_yes_no(response.text)

    async with anyio.create_task_group() as tg:
        for cap, key in zip(ask, keys, strict=True):
            tg.start_soon(one, cap, key)
    total = NO_USAGE
    for u in usages:
        total = total + u
    fatal = next((e for e in errors.values() if default_classification(e).severity is ErrorSeverity.FATAL), None)
    # Every call failed and nothing else is selected: the failure is the selection's own (a bad
    # key, an outage), raised for the ladder to judge, not reported as "no capability selected".
    failed = fatal or (errors[ask[0].name] if ask and len(errors) == len(ask) and not always else None)
    if failed is not None:
        if lost is not None and total is not NO_USAGE:  # counted here: a journal records the failure as it was
            lost(total)
        if failed is fatal:
            mark_fatal(failed)
        raise failed
    skipped = []
    for cap in ask:
        if cap.name in errors or answers.get(cap.name) is None:
            why = type(errors[cap.name]).__name__ if cap.name in errors else "no yes/no in the reply"
            log.warning("capability classification failed; skipped", capability=cap.name, why=why)
            skipped.append(cap.name)
    picked = [c.name for c in active if c.always_active or answers.get(c.name)]
    chosen, added = expand_requirements(picked, capabilities, ctx.context, excluded)
    return Selection(chosen, always, tuple(skipped), added, total)
