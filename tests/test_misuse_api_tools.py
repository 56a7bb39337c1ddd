"""Misuse of tools, recovery hooks, capabilities, handoffs and the test kit: each is an error naming the fix."""

from __future__ import annotations

import contextlib
import functools
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

from jeeves_router import Agent, RouterRoute, UsageError
from jeeves_router.testing import ScriptedModel


def _add(a: int, b: int) -> int:
    return a + b


class _Adder:
    def __call__(self, a: int) -> int:
        return a


@pytest.mark.parametrize(
    ("fn", "kind"),
    [(functools.partial(_add, 1), "partial"), (_Adder(), "_Adder"), (len, "builtin_function_or_method")],
)
def test_a_tool_of_a_partial_a_callable_object_or_a_builtin_says_to_write_a_def(fn: Any, kind: str) -> None:
    from jeeves_router import tool

    with pytest.raises(UsageError, match=rf"wraps a function or a bound method .*, not a {kind}; write a def"):
        tool(fn, name="add_one")
    with pytest.raises(UsageError, match=rf"not a {kind}"):  # without a name: no AttributeError on __name__
        tool(fn)


def test_a_tool_description_that_is_no_string_is_named() -> None:
    from jeeves_router import tool

    with pytest.raises(UsageError, match=r"tool '_add': description must be a string, got 3"):
        tool(description=3)(_add)  # type: ignore[call-overload]


def test_tool_on_a_method_in_a_class_body_is_refused_and_the_bound_method_works() -> None:
    import anyio

    from jeeves_router import tool
    from jeeves_router.tools import ToolContext

    class Shop:
        def __init__(self) -> None:
            self.rate = 2

        def price(self, qty: int) -> int:
            """Price of qty items."""
            return qty * self.rate

    with pytest.raises(UsageError, match=r"tool 'price': its first parameter is 'self', so it is a method; make the"):
        tool(Shop.price)
    with pytest.raises(UsageError, match=r"tool\(obj\.price\)"):
        tool(name="price")(Shop.__dict__["price"])
    bound = tool(Shop().price)
    assert list(bound.parameters["properties"]) == ["qty"]
    outcome = anyio.run(bound.call, {"qty": 3}, ToolContext("s", ("a",)))
    assert (outcome.content, outcome.is_error) == ("6", False)


def test_a_run_cancelled_during_a_blocking_sync_tool_ends_without_waiting_for_the_tool() -> None:
    import threading

    import anyio

    from jeeves_router import tool
    from jeeves_router.testing import Call

    started, release, finished = anyio.Event(), threading.Event(), threading.Event()

    @tool
    def wait_for_clerk() -> str:
        """Blocks until the clerk answers."""
        anyio.from_thread.run_sync(started.set)  # the tool runs in a worker thread of the run's loop
        release.wait(5)  # a safety net: the test releases it as soon as the run has ended
        finished.set()
        return "answered"

    agent = Agent("x", name="a", model=ScriptedModel([Call("wait_for_clerk", {}), "done"]), tools=[wait_for_clerk])
    tool_still_blocked: list[bool] = []

    async def main() -> None:
        scope = anyio.CancelScope()

        async def run() -> None:
            with scope:
                await agent.run("go")

        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await started.wait()
            scope.cancel()
        tool_still_blocked.append(not finished.is_set())  # the run is over: did it wait for the thread?
        release.set()
        await anyio.to_thread.run_sync(finished.wait, 5)

    anyio.run(main)
    assert tool_still_blocked == [True]


async def _async_hook(exc: BaseException, context: Any) -> None:
    return None


def _one_arg_hook(exc: BaseException) -> None:
    return None


def _hook_owners() -> list[tuple[str, Any]]:
    from jeeves_router import Capability, Recovery

    async def lookup(request: Any) -> str:
        return "ok"

    agent = Agent("x", name="b", model=ScriptedModel([]))
    return [
        ("Recovery", lambda hook: Recovery(classify_error=hook)),
        ("agent 'a'", lambda hook: Agent("x", name="a", model=ScriptedModel([]), classify_error=hook)),
        ("route 'b'", lambda hook: RouterRoute("b", agent, "payments", classify_error=hook)),
        ("capability 'sql'", lambda hook: Capability("sql", lookup, "runs SQL", classify_error=hook)),
    ]


@pytest.mark.parametrize(("where", "make"), _hook_owners())
@pytest.mark.parametrize(
    ("hook", "match"),
    [
        (3, r"classify_error must be a function \(exc, context\) -> ErrorClassification \| None, got 3"),
        (_async_hook, r"classify_error must be a plain def, not async def"),
        (_one_arg_hook, r"classify_error must take two arguments, \(exc, context\)"),
    ],
)
def test_a_classify_error_hook_the_ladder_could_not_call_is_refused_at_construction(
    where: str, make: Any, hook: object, match: str
) -> None:
    with pytest.raises(UsageError, match=rf"^{where}: {match}"):
        make(hook)
    make(lambda exc, context: None)  # a hook it can call is taken


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"metadata": [1, 2]}, r"metadata must be a mapping, e\.g\. \{'order': 42\}, got \[1, 2\]"),
        ({"user_message": 3}, r"ErrorClassification: user_message must be a string or None, got 3"),
    ],
)
def test_error_classification_fields_of_the_wrong_type_are_named(kwargs: dict[str, Any], match: str) -> None:
    from jeeves_router.recovery import ErrorClassification

    with pytest.raises(UsageError, match=match):
        ErrorClassification("critical", **kwargs)
    shown = ErrorClassification("critical", user_message="try later", metadata={"order": 42}).format_for_llm()
    assert shown.splitlines()[1:] == ["Reason: try later", "order: 42"]


async def _lookup(call: Any) -> str:
    return "ok"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"bypass": "no"}, r"bypass must be True or False, got 'no'"),
        ({"task_extraction": "no"}, r"task_extraction must be True or False, got 'no'"),
        ({"max_iterations": True}, r"max_iterations must be an integer >= 1, got True"),
        ({"max_concurrent_classifications": True}, r"max_concurrent_classifications must be an integer >= 1, got True"),
    ],
)
def test_capabilities_flags_and_counts_of_the_wrong_type_are_named(kwargs: dict[str, Any], match: str) -> None:
    from jeeves_router import Capabilities, Capability

    with pytest.raises(UsageError, match=match):  # bypass="no" selected every capability
        Capabilities([Capability("sql", _lookup, "runs SQL")], **kwargs)


@pytest.mark.parametrize(
    ("names", "listed"),
    [
        (("billing", "Billing"), "'billing' = 'Billing'"),
        (("tech-support", "tech_support"), "'tech-support' = 'tech_support'"),
        (("sql", "sql"), "'sql' = 'sql'"),
    ],
)
def test_capability_names_alike_but_for_case_or_separator_are_refused_as_router_routes_are(
    names: tuple[str, str], listed: str
) -> None:
    from jeeves_router import Capabilities, Capability

    with pytest.raises(UsageError, match=rf"^Capabilities: duplicate capability names {listed} \(names are compared"):
        Capabilities([Capability(n, _lookup, "runs SQL") for n in names])


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda c: c.Capability("sql", _lookup, "d", retry_policy=3), r"'sql': retry_policy must be a RetryPolicy"),
        (lambda c: c.Capability("sql", _lookup, "d", always_active="no"), r"always_active must be True or False"),
        (lambda c: c.ClassifierGuide(None), r"ClassifierGuide: instructions must be a string, got None"),
        (
            lambda c: c.ClassifierGuide("when asked for data", c.ClassifierExample("show invoices", True)),
            r"ClassifierGuide examples must be a list, got ClassifierExample\(.*pass a list even of one",
        ),
        (lambda c: c.ClassifierExample("show invoices", "no"), r"result must be True or False, got 'no'"),
        (lambda c: c.ClassifierExample(None, True), r"ClassifierExample: query and reason must be strings"),
    ],
)
def test_capability_guide_and_example_fields_of_the_wrong_type_are_named(make: Any, match: str) -> None:
    import jeeves_router as c

    with pytest.raises(UsageError, match=match):
        make(c)


def test_scripted_model_given_one_string_says_to_pass_a_list() -> None:
    with pytest.raises(UsageError, match=r"ScriptedModel steps must be a list, got 'hello': pass a list even of one"):
        ScriptedModel("hello")  # was five replies: 'h', 'e', 'l', 'l', 'o'
    with pytest.raises(UsageError, match=r"unsupported script step 3: a step is a string, Chunks, a Call"):
        ScriptedModel(["hi", 3])  # type: ignore[list-item]


def test_function_model_and_capture_events_name_an_argument_of_the_wrong_kind() -> None:
    import anyio

    from jeeves_router.testing import FunctionModel, capture_events

    with pytest.raises(UsageError, match=r"FunctionModel takes a function of the request, .*got 'hi'"):
        FunctionModel("hi")  # type: ignore[arg-type]
    agent = Agent("x", name="a", model=FunctionModel(lambda request: 3))  # type: ignore[arg-type, return-value]
    # was "unsupported script step 3: a step is ..., a Call ... or an exception": a FunctionModel has no script
    returned = r"^FunctionModel 'function': the function returned 3; return a string, a Reply or a ModelResponse"
    with pytest.raises(UsageError, match=returned):
        agent.run_sync("hi")
    with pytest.raises(UsageError, match=r"capture_events takes an Agent first, then the prompt; got str"):
        anyio.run(capture_events, "hi", agent)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"reason": 3}, r"Handoff to 'billing': reason must be a string or None, got 3"),
        ({"payload": [1]}, r"Handoff to 'billing': payload must be a mapping \(JSON object\) or None, got \[1\]"),
        ({"confidence": "0.9"}, r"Handoff to 'billing': confidence must be a number or None, got '0\.9'"),
    ],
)
def test_handoff_fields_of_the_wrong_kind_are_named(kwargs: dict[str, Any], match: str) -> None:
    from jeeves_router import Handoff

    with pytest.raises(UsageError, match=match):
        Handoff("billing", **kwargs)
    assert Handoff("billing", confidence=1.5).confidence == 1.5  # a router model's number: the decision falls back


def test_a_sync_tool_returning_a_coroutine_is_a_usage_error_not_a_coroutine_repr_for_the_model() -> None:
    import warnings

    from jeeves_router import tool
    from jeeves_router.testing import Call

    async def fetch() -> str:
        return "42"

    @tool
    def lookup() -> Any:
        """Looks it up (but forgot to be async)."""
        return fetch()

    model = ScriptedModel([Call("lookup", {}), "done"])
    agent = Agent("x", name="a", model=model, tools=[lookup])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the coroutine is closed: no 'never awaited' warning
        with pytest.raises(UsageError, match=r"tool 'lookup' is a plain def but returned a coroutine, which nothing"):
            agent.run_sync("go")
    assert model.remaining == 1  # the model was never shown '<coroutine object ...>'


class _SyncOpen:
    @contextlib.contextmanager
    def open(self) -> Iterator[list[Any]]:
        yield []


class _CoroutineOpen:
    async def open(self) -> list[Any]:
        return []


class _ListOpen:
    def open(self) -> list[Any]:
        return []


class _FlagOpen:
    open = True


@pytest.mark.parametrize(
    ("toolset", "got"),
    [
        (_SyncOpen(), "open() returned a _GeneratorContextManager"),
        (_CoroutineOpen(), "open() returned a coroutine"),
        (_ListOpen(), "open() returned a list"),
        (_FlagOpen(), "its open is a bool, not a method"),
    ],
)
def test_a_toolset_whose_open_is_no_async_context_manager_is_a_usage_error_naming_the_fix(
    toolset: Any, got: str
) -> None:
    import anyio

    from jeeves_router.testing import FunctionModel

    agent = Agent("x", name="helper", model=FunctionModel(lambda r: "hi"), tools=[toolset])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an async def open's coroutine is closed, never left unawaited
        with pytest.raises(UsageError) as info:
            anyio.run(lambda: agent.run("hello"))
    message = str(info.value)
    assert message.startswith(f"agent 'helper': {type(toolset).__name__} in tools is taken as a toolset")
    assert got in message
    assert "@contextlib.asynccontextmanager" in message
