"""Checks of arguments users often get wrong: a list given a single thing, a run's history, an agent's options."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from ._articles import a_type
from ._text import valid_text
from .errors import UsageError
from .messages import Message, Part, TextPart

__all__ = ["check_agent_options", "check_text_and_examples", "history_messages", "listed", "route_specs"]


def listed(items: object, *, what: str, example: str) -> list[Any]:
    """The items of ``items``, a list (or any iterable that is not a string or a mapping).

    Args:
        items: What the caller passed.
        what: The argument's name, for the message (``tools``, ``routes``).
        example: The call to show, e.g. ``tools=[lookup_invoice]``.

    Raises:
        UsageError: for one object in a list's place (a tool, a route, an agent) or a string,
            naming it and how to pass it.
    """
    if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable):
        name = getattr(items, "name", None)
        shown = f"{type(items).__name__} {name!r}" if isinstance(name, str) else repr(items)
        raise UsageError(f"{what} must be a list, got {shown[:120]}: pass a list even of one, {example}")
    return list(items)


def check_text_and_examples(owner: str, description: object, examples: object = ()) -> None:
    """Refuse a description that is not a string and examples that are not a list of strings.

    A string given as ``examples`` (``RouterRoute("billing", agent, "payments", "I was charged twice")``)
    would otherwise be read one character at a time.

    Raises:
        UsageError: naming ``owner`` and what to pass.
    """
    if not isinstance(description, str):
        raise UsageError(f"{owner}: description must be a string, got {type(description).__name__} {description!r:.60}")
    if isinstance(examples, str) or not all(isinstance(e, str) for e in listed(examples, what="examples", example="")):
        shown = f"{examples!r:.60}"
        raise UsageError(f"{owner}: examples must be a list of strings, e.g. ['I was charged twice'], got {shown}")


def check_agent_options(
    name: str, architecture: object, temperature: object, max_tokens: object, runtime: object, hook: object
) -> None:
    """Refuse ``Agent`` options of the wrong kind, naming the agent and the option.

    Raises:
        UsageError: for an architecture that is a class or no architecture, a temperature
            that is no number in [0, 2], ``max_tokens`` that is no positive integer, a runtime
            without ``step``/``model_stream``, or a ``classify_error`` that cannot be called.
    """
    where = f"agent {name!r}"
    if isinstance(architecture, type):
        raise UsageError(f"{where}: architecture must be an instance, e.g. {architecture.__name__}(...), not the class")
    if architecture is not None and not callable(getattr(architecture, "validate", None)):
        shown = f"{architecture!r:.60}"
        raise UsageError(f"{where}: architecture must be a Router, ToolLoop, Capabilities, ..., got {shown}")
    number = isinstance(temperature, (int, float)) and not isinstance(temperature, bool)
    if temperature is not None and not (number and 0.0 <= temperature <= 2.0):  # type: ignore[operator]
        raise UsageError(f"{where}: temperature must be a number within [0, 2], got {temperature!r}")
    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1):
        raise UsageError(f"{where}: max_tokens must be a positive integer or None, got {max_tokens!r}")
    if runtime is not None and not all(callable(getattr(runtime, m, None)) for m in ("step", "model_stream")):
        shown = f"{runtime!r:.60}"
        raise UsageError(f"{where}: runtime must be a Runtime (e.g. JournalRuntime(SQLiteJournal(path))), got {shown}")
    check_hook(hook, where)


def route_specs(routes: object, *, owner: str) -> tuple[Any, ...]:
    """The routes a classifier is built on: objects with a ``name``, ``description`` and ``examples``.

    Raises:
        UsageError: for a route given as a bare name (``["billing", "technical"]``) or another
            object, or a description or examples of the wrong kind, naming ``owner``.
    """
    spec = "RouteSpec('billing', 'payments', ('I was charged twice',))"
    items = listed(routes, what=f"{owner} routes", example=f"[{spec}]")
    for r in items:
        if not isinstance(getattr(r, "name", None), str):
            shown = f"{r!r:.40}"
            raise UsageError(f"{owner}: routes must be RouteSpec (or RouterRoute) objects, got {shown}: e.g. {spec}")
        check_text_and_examples(f"route {r.name!r}", getattr(r, "description", ""), getattr(r, "examples", ()))
    return tuple(items)


_MESSAGES_HINT = (
    "build them with jeeves_router.messages.user(...) and assistant(...), e.g. history=[user('hi'), assistant('hello')]"
)


def history_messages(history: Sequence[Message] | None) -> tuple[Message, ...]:
    """``history`` as a tuple of messages, the text of their text parts made valid Unicode (:func:`valid_text`).

    Raises:
        UsageError: for a string, a dict or anything but :class:`~jeeves_router.messages.Message`
            objects, with how to build them.
    """
    if isinstance(history, (str, bytes, Mapping)):  # one message's text or dict where the list goes
        raise UsageError(f"history must be a list of Message objects, got {type(history).__name__}; {_MESSAGES_HINT}")
    if not history:
        return ()
    messages = tuple(history)
    for m in messages:
        if not isinstance(m, Message):
            raise UsageError(f"history must hold Message objects, got {type(m).__name__} {m!r:.60}; {_MESSAGES_HINT}")
    if all(valid_text(p.text) is p.text for m in messages for p in m.parts if isinstance(p, TextPart)):
        return messages  # nearly always: no unpaired surrogate anywhere
    return tuple(dataclasses.replace(m, parts=tuple(_valid_part(p) for p in m.parts)) for m in messages)


def _valid_part(part: Part) -> Part:
    return dataclasses.replace(part, text=valid_text(part.text)) if isinstance(part, TextPart) else part


def check_texts_to_classify(
    call: str, texts: object, routes: object, *, one: bool = False, labels: bool = False
) -> None:
    """Refuse what a classifier's ``classify_text`` / ``classify_batch`` would misread.

    A string passed as the batch (or as ``routes``) would otherwise be read one character at a
    time: ``classify_batch("refund")`` classified six one-letter texts.

    Args:
        call: The method, for the message (``EmbeddingClassifier.classify_batch``).
        texts: The text (``one=True``) or the list of texts given.
        routes: The route names given, or ``None``.
        one: Whether ``texts`` is a single text.
        labels: Whether ``routes`` are ``fit``'s labels, one per text (``None`` refused).

    Raises:
        UsageError: naming the argument, what it must be and what was given.
    """
    if one and not isinstance(texts, str):
        raise UsageError(f"{call}: text must be a string, got {texts!r:.120}")
    if not one and (
        isinstance(texts, str) or not isinstance(texts, Sequence) or not all(isinstance(t, str) for t in texts)
    ):
        example = f"{call.rpartition('.')[2]}(['refund my card'])"
        raise UsageError(f"{call}: texts must be a list of strings, got {texts!r:.120}: e.g. {example}")
    if labels and routes is None:
        raise UsageError(f"{call}: labels must be a list of route names, one per text, e.g. ['billing', 'oos']")
    if routes is not None and (
        isinstance(routes, str) or not isinstance(routes, Collection) or not all(isinstance(r, str) for r in routes)
    ):
        what = (
            "labels must be a list of route names, one per text"
            if labels
            else "routes must be a list of route names or None"
        )
        raise UsageError(f"{call}: {what}, got {routes!r:.120}: e.g. ['billing']")


def check_hook(hook: object, where: str) -> None:
    """Refuse a ``classify_error`` hook that the recovery ladder could not call.

    A hook is called as ``hook(exc, context)`` and its answer used at once; one that cannot
    be called so (a value, a one-argument function) or an ``async def`` (its coroutine is
    never awaited) would turn every failure it judges into CRITICAL at run time.

    Raises:
        UsageError: naming ``where`` and the signature to write.
    """
    if hook is None:
        return
    want = "a function (exc, context) -> ErrorClassification | None"
    if not callable(hook):
        raise UsageError(f"{where}: classify_error must be {want}, got {hook!r:.60}")
    if inspect.iscoroutinefunction(hook):
        raise UsageError(f"{where}: classify_error must be a plain def, not async def: {want}")
    try:
        inspect.signature(hook).bind(None, None)
    except TypeError:
        raise UsageError(f"{where}: classify_error must take two arguments, (exc, context): {want}") from None
    except ValueError:  # no signature to read (some builtins): called as it is
        pass


def check_handoff(target: object, reason: object, payload: object, confidence: object) -> None:
    """Refuse the fields of a :class:`~jeeves_router.tools.Handoff` of the wrong kind, naming the field.

    Raises:
        UsageError: for a target that is no non-empty string (an agent given for its name),
            a reason that is no string, a payload that is no mapping, or a confidence that is
            no number (``"0.9"``; a number outside [0, 1] fails closed where it is decided).
    """
    if not (isinstance(target, str) and target):
        name = getattr(target, "name", None)
        hint = f": pass its name, Handoff(target={name!r})" if isinstance(name, str) else ""
        raise UsageError(f"Handoff target must be an agent or route name (a string), got {target!r}{hint}")
    if reason is not None and not isinstance(reason, str):
        raise UsageError(f"Handoff to {target!r}: reason must be a string or None, got {reason!r:.60}")
    if payload is not None and not isinstance(payload, Mapping):
        raise UsageError(f"Handoff to {target!r}: payload must be a mapping (JSON object) or None, got {payload!r:.60}")
    # a number outside [0, 1] (a router model's 1.5 or NaN) is kept: the router's decision sends it to the fallback
    if confidence is not None and (isinstance(confidence, bool) or not isinstance(confidence, (int, float))):
        raise UsageError(f"Handoff to {target!r}: confidence must be a number or None, got {confidence!r}")


def returned_awaitable(name: str, value: object) -> UsageError:
    """The error for a sync tool function that returned ``value``, an awaitable (closed here, so it never runs)."""
    close = getattr(value, "close", None)
    if inspect.iscoroutine(value) and callable(close):
        close()  # no "coroutine was never awaited" warning: the error says it instead
    return UsageError(
        f"tool {name!r} is a plain def but returned {a_type(value)}, which nothing awaits: "
        "declare the function `async def` and await inside it"
    )


def opened_toolset(owner: str, toolset: object) -> Any:
    """``toolset.open()``, once it is known to be the async context manager a toolset's ``open`` must return.

    Raises:
        UsageError: for an ``open`` that is no method or returned something else (a list, a
            sync context manager, an ``async def``'s coroutine: closed here), naming the agent,
            the toolset and how to write ``open``.
    """
    how = (
        "a toolset's open() must return an async context manager yielding its tools (write it as an "
        "@contextlib.asynccontextmanager async def); pass a Tool or a function in tools= instead if it is no toolset"
    )
    where = f"agent {owner!r}: {type(toolset).__name__} in tools is taken as a toolset (it has an open attribute)"
    open_ = getattr(toolset, "open", None)
    if not callable(open_):
        raise UsageError(f"{where}, but its open is {a_type(open_)}, not a method; {how}")
    opened = open_()
    if callable(getattr(opened, "__aenter__", None)) and callable(getattr(opened, "__aexit__", None)):
        return opened
    if inspect.iscoroutine(opened):
        opened.close()  # no "coroutine was never awaited" warning: the error says it instead
    raise UsageError(f"{where}, but its open() returned {a_type(opened)}, not an async context manager; {how}")
