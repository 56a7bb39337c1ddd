"""Agent and the default tool loop."""

from __future__ import annotations

import pytest

from jeeves_router import Agent, ToolContext, ToolResult, UsageError, tool
from jeeves_router.errors import ScriptExhausted
from jeeves_router.messages import user
from jeeves_router.testing import Call, Chunks, FunctionModel, Reply, ScriptedModel, capture_events

pytestmark = pytest.mark.anyio


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
async def explode(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(f"boom: {reason}")


async def test_tool_loop_calls_tools_until_text() -> None:
    model = ScriptedModel([Call("add", {"a": 2, "b": 3}), "The sum is 5."])
    agent = Agent("math", name="calc", model=model, tools=[add])
    r = await agent.run("2+3?")
    assert (r.output, r.status) == ("The sum is 5.", "ok")
    tool_msg = model.requests[1].messages[-1]
    assert tool_msg.role == "tool" and tool_msg.parts[0].content == "5"  # type: ignore[union-attr]
    assert model.requests[0].tools[0].name == "add"
    assert model.requests[0].tools[0].parameters["required"] == ["a", "b"]
    assert [m.role for m in r.messages] == ["user", "assistant", "tool", "assistant"]


async def test_tool_errors_go_back_to_the_model() -> None:
    model = ScriptedModel(
        [
            [
                Call("explode", {"reason": "x"}),
                Call("add", {"a": "not a number", "b": 1}),
                Call("nope", {}),
                Call("add", raw_arguments="{bad", argument_error="Expecting property name"),
            ],
            "recovered",
        ]
    )
    agent = Agent("t", name="t", model=model, tools=[add, explode])
    events = await capture_events(agent, "go")
    results = [e for e in events if isinstance(e, ToolResult)]
    assert [r.is_error for r in results] == [True, True, True, True]
    assert results[0].content == "explode failed: RuntimeError"  # its message only under expose_details
    assert "invalid arguments for add" in results[1].content and "a:" in results[1].content
    assert "unknown tool 'nope'" in results[2].content
    assert "not a valid JSON object" in results[3].content
    assert events[-1].result.output == "recovered"  # type: ignore[union-attr]


async def test_max_turns_is_a_clear_status() -> None:
    model = ScriptedModel([Call("add", {"a": 1, "b": 1})] * 3)
    r = await Agent("t", name="t", model=model, tools=[add], max_turns=3).run("loop")
    assert r.status == "max_turns" and r.output is None and not r.ok
    assert len(model.requests) == 3


async def test_history_and_system_prompt() -> None:
    model = ScriptedModel(["ok"])
    await Agent("Be brief.", name="a", model=model, temperature=0.2, max_tokens=50).run("new", history=[user("old")])
    req = model.requests[0]
    assert req.system == "Be brief." and [m.text for m in req.messages] == ["old", "new"]
    assert (req.temperature, req.max_tokens) == (0.2, 50)


async def test_sync_function_tools_and_context_injection() -> None:
    seen = {}

    @tool
    def whoami(ctx: ToolContext) -> str:
        """Report the session."""
        seen["sid"] = ctx.session_id
        seen["tier"] = ctx.context.get("tier")
        return "ok"

    model = ScriptedModel([Call("whoami"), "done"])
    assert "ctx" not in whoami.parameters.get("properties", {})
    await Agent("t", name="t", model=model, tools=[whoami]).run("x", session_id="s1", context={"tier": "gold"})
    assert seen == {"sid": "s1", "tier": "gold"}


def test_run_sync() -> None:
    r = Agent("t", name="t", model=ScriptedModel([Chunks("a", "b")])).run_sync("x")
    assert r.output == "ab"


async def test_run_sync_inside_a_running_event_loop_says_to_await_run() -> None:
    agent = Agent("t", name="t", model=ScriptedModel(["answer"]))
    with pytest.raises(UsageError, match=r"agent 't': run_sync\(\) cannot start an event loop .*`await agent\.run"):
        agent.run_sync("x")
    assert (await agent.run("x")).output == "answer"  # the refused call took no step of the script


async def test_function_model() -> None:
    fm = FunctionModel(lambda req: Reply(text=f"echo {req.messages[-1].text}"))
    assert (await Agent("t", name="t", model=fm).run("hi")).output == "echo hi"


async def test_model_string_without_adapter_extra_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    for mod in ("openai", "anthropic"):
        monkeypatch.setitem(sys.modules, mod, None)  # as if the extra were not installed
    for name, extra in (("openai:gpt-4.1-mini", "openai"), ("anthropic:claude-haiku-4-5", "anthropic")):
        agent = Agent("t", name="t", model=name)  # lazy: no error yet
        with pytest.raises(UsageError, match=rf"jeeves-router\[{extra}\]"):
            await agent.run("x")


@pytest.mark.parametrize(
    ("model", "match"),
    [("gpt-4", "must look like"), ("nobody:m", "unknown model provider"), (42, "must be a Model")],
)
async def test_bad_model_values(model: object, match: str) -> None:
    with pytest.raises(UsageError, match=match):
        await Agent("t", name="t", model=model).run("x")  # type: ignore[arg-type]


def test_a_model_string_with_a_typo_fails_where_it_is_built() -> None:
    """A misspelt provider or a missing one is refused by the constructor, before any request (no SDK import)."""
    from jeeves_router import Capabilities, Capability, LLMClassifier, Router, RouterRoute
    from jeeves_router.classify.toolcall import ToolCallClassifier

    typo = r"unknown model provider 'anthropc' in 'anthropc:claude-haiku-4-5'; known providers: anthropic, "
    bare = r"'gpt-4o-mini' must look like 'provider:model', e.g. 'openai:gpt-4\.1-mini'"
    spec = Agent("s", name="spec", model=ScriptedModel([]))
    builds = [
        lambda m: Agent("t", name="t", model=m),
        lambda m: LLMClassifier(m),
        lambda m: ToolCallClassifier(m),
        lambda m: Router([RouterRoute("spec", spec, "all")], classifier_model=m),
        lambda m: Capabilities([Capability("spec", spec, "all")], classifier_model=m),
        lambda m: Capabilities([Capability("spec", spec, "all")], orchestrator_model=m),
    ]
    for build in builds:
        with pytest.raises(UsageError, match=typo):
            build("anthropc:claude-haiku-4-5")
        with pytest.raises(UsageError, match=bare):
            build("gpt-4o-mini")
    with pytest.raises(UsageError, match=r"model of agent 't' must be a Model or a 'provider:model' string, got int"):
        Agent("t", name="t", model=42)  # type: ignore[arg-type]
    assert Agent("t", name="t", model="openai:gpt-4.1-mini").model == "openai:gpt-4.1-mini"  # still lazy


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"name": "has space"}, "agent name"),
        ({"max_turns": 0}, "max_turns"),
        ({"temperature": 3.0}, "temperature"),
        ({"tools": [add, add]}, "two tools named 'add'"),
    ],
)
def test_agent_construction_errors(kwargs: dict[str, object], match: str) -> None:
    kwargs.setdefault("name", "a")
    with pytest.raises(UsageError, match=match):
        Agent("x", model=ScriptedModel([]), **kwargs)  # type: ignore[arg-type]


async def test_scripted_model_exhaustion_and_completion() -> None:
    model = ScriptedModel(["one", "two"])
    agent = Agent("t", name="t", model=model)
    await agent.run("a")
    with pytest.raises(AssertionError, match="1 scripted step"):
        model.assert_complete()
    await agent.run("b")
    model.assert_complete()
    with pytest.raises(ScriptExhausted, match="script exhausted after 2"):
        await agent.run("c")
