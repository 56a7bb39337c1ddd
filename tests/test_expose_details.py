"""``Recovery(expose_details=...)`` decides whether an exception's message leaves the run.

An exception's text may quote a secret (an API key in a URL, a card number in a payload). Off
(the default, and where no Recovery is in force), only its type is shown: to a model (the tool
result the calling model reads, the reclassification and replan prompts), in the run's events,
in the journal and in the logs. On, the message is shown to the models, in the events, the
report and the journal; never in the logs nor the explanation model's prompt. The setting in
force is the nearest Recovery's: a run without one takes its parent's. The served replies and
MCP results are in ``test_expose_details_fronts.py``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from jeeves_router import Agent, ErrorClassification, ErrorSeverity, Recovery, Router, RouterRoute, tool
from jeeves_router.architectures.capabilities.architecture import Capability
from jeeves_router.architectures.react import ToolLoop
from jeeves_router.events import Event, RunFailed, ToolResult
from jeeves_router.journal import JournalRuntime, SQLiteJournal
from jeeves_router.messages import ToolResultPart
from jeeves_router.models.base import ModelRequest
from jeeves_router.testing import Call, FunctionModel, RecordedSleeps, Reply, capture_events
from tests.test_capabilities import Brain, Fn, agent, plan

SECRET = "sk-secret-123 card 4111111111111111"
CARD = "4111111111111111"


def shows_secret(text: str) -> bool:
    return CARD in text or "sk-secret-123" in text


def lookup_tool() -> Any:
    @tool
    def lookup(invoice: str) -> str:
        """Look up an invoice."""
        raise RuntimeError(SECRET)

    return lookup


def calls_lookup(request: ModelRequest) -> Reply | str:
    """Calls ``lookup`` once, then answers without quoting the tool."""
    if request.messages[-1].role == "tool":
        return "Sorry, I could not look that up."
    return Reply(calls=[Call("lookup", {"invoice": "INV-7"})])


def teller(recovery: Recovery | None = None) -> tuple[Agent, FunctionModel]:
    model = FunctionModel(calls_lookup, name="teller")
    arch = ToolLoop(recovery=recovery) if recovery is not None else None
    return Agent("Teller.", name="teller", model=model, tools=[lookup_tool()], architecture=arch), model


def tool_result_sent(model: FunctionModel) -> str:
    part = model.requests[-1].messages[-1].parts[0]
    assert isinstance(part, ToolResultPart) and part.is_error
    return part.content


def tool_result_event(events: list[Event]) -> ToolResult:
    (ev,) = [e for e in events if isinstance(e, ToolResult)]
    return ev


@pytest.mark.anyio
@pytest.mark.parametrize("recovery", [None, Recovery()], ids=["no-recovery", "default-recovery"])
async def test_a_tools_exception_reaches_the_model_and_the_events_by_its_type_only(recovery: Recovery | None) -> None:
    desk, model = teller(recovery)
    events = await capture_events(desk, "what is on INV-7?")
    assert tool_result_sent(model) == "lookup failed: RuntimeError"
    assert tool_result_event(events).content == "lookup failed: RuntimeError"
    assert not any(shows_secret(repr(ev)) for ev in events)


@pytest.mark.anyio
async def test_expose_details_shows_a_tools_exception_to_the_model_that_called_it() -> None:
    desk, model = teller(Recovery(expose_details=True))
    events = await capture_events(desk, "what is on INV-7?")
    assert tool_result_sent(model) == f"lookup failed: RuntimeError: {SECRET}"
    assert tool_result_event(events).content == f"lookup failed: RuntimeError: {SECRET}"


def not_mine(exc: BaseException, context: object) -> ErrorClassification | None:
    if isinstance(exc, RuntimeError):
        return ErrorClassification(ErrorSeverity.RECLASSIFICATION, "Not a billing question.")
    return None


def fails(request: ModelRequest) -> str:
    raise RuntimeError(SECRET)


def classify(request: ModelRequest) -> str:
    offered = (request.system or "").split("Routes:")[-1]
    return f"route: {'billing' if 'billing' in offered else 'general'}\nconfidence: 0.9"


def desk(expose: bool, billing_model: Any = None, **kw: Any) -> tuple[Agent, FunctionModel]:
    """A Router whose billing specialist fails with the secret (RECLASSIFICATION) or runs ``billing_model``."""
    billing = Agent(
        "Payments.",
        name="billing",
        model=billing_model or FunctionModel(fails, name="billing"),
        tools=[lookup_tool()],
        classify_error=not_mine,
    )
    general = Agent("The rest.", name="general", model=FunctionModel(lambda r: "general answer", name="general"))
    classifier = FunctionModel(classify, name="classifier")
    recovery = Recovery(sleep=RecordedSleeps(), expose_details=expose)
    routes = [RouterRoute("billing", billing, "payments"), RouterRoute("general", general, "the rest")]
    router = Router(routes=routes, recovery=recovery)
    return Agent("Desk", name="desk", model=classifier, architecture=router, **kw), classifier


def prompts(model: FunctionModel) -> str:
    return repr(model.requests)


@pytest.mark.anyio
async def test_the_reclassification_prompt_names_the_failure_by_its_type_only() -> None:
    agent_, classifier = desk(expose=False)
    result = await agent_.run("I was charged twice")
    assert result.route == "general" and len(classifier.requests) == 2
    second = prompts(classifier).split("A previous attempt failed")[-1]
    assert "RuntimeError" in second and "Not a billing question." in second
    assert not shows_secret(prompts(classifier))


@pytest.mark.anyio
async def test_expose_details_puts_the_message_in_the_reclassification_prompt() -> None:
    agent_, classifier = desk(expose=True)
    await agent_.run("I was charged twice")
    assert f"RuntimeError: {SECRET}" in prompts(classifier)


@pytest.mark.anyio
async def test_a_routers_expose_details_reaches_its_specialists_tool_loop() -> None:
    billing = FunctionModel(calls_lookup, name="billing")
    agent_, _ = desk(expose=True, billing_model=billing)
    await agent_.run("I was charged twice")
    assert tool_result_sent(billing) == f"lookup failed: RuntimeError: {SECRET}"
    billing = FunctionModel(calls_lookup, name="billing")
    agent_, _ = desk(expose=False, billing_model=billing)
    await agent_.run("I was charged twice")
    assert tool_result_sent(billing) == "lookup failed: RuntimeError"


def replan(exc: BaseException, context: object) -> ErrorClassification | None:
    return ErrorClassification(ErrorSeverity.REPLANNING) if isinstance(exc, RuntimeError) else None


@pytest.mark.anyio
@pytest.mark.parametrize("expose", [False, True])
async def test_the_replan_prompt_shows_the_message_only_under_expose_details(expose: bool) -> None:
    brain = Brain(yes={"notify"}, plans=[plan("notify")])
    caps = [Capability("notify", Fn("Customer told.", fail=[RuntimeError(SECRET)]), "tells the customer")]
    recovery = Recovery(sleep=RecordedSleeps(), classify_error=replan, expose_details=expose)
    result = await agent(brain, caps, recovery=recovery).run("tell the customer")
    assert result.status == "ok"
    plans = repr([r for kind, r in brain.requests if kind == "plan"])
    assert "RuntimeError" in plans
    assert shows_secret(plans) is expose


def fatal(exc: BaseException, context: object) -> ErrorClassification | None:
    return ErrorClassification(ErrorSeverity.FATAL) if isinstance(exc, RuntimeError) else None


async def failed_event(agent_: Agent) -> RunFailed:
    events: list[Event] = []
    with pytest.raises(RuntimeError):
        async with agent_.stream("x") as stream:
            async for ev in stream:
                events.append(ev)
    return [e for e in events if isinstance(e, RunFailed)][-1]


@pytest.mark.anyio
async def test_run_failed_carries_the_message_only_under_expose_details() -> None:
    plain = Agent("Plain.", name="plain", model=FunctionModel(fails, name="plain"))
    hidden = await failed_event(plain)
    assert (hidden.error_type, hidden.message) == ("RuntimeError", "")
    arch = ToolLoop(recovery=Recovery(expose_details=True, classify_error=fatal))
    shown = await failed_event(Agent("Plain.", name="plain", model=FunctionModel(fails, name="p"), architecture=arch))
    assert (shown.error_type, shown.message) == ("RuntimeError", SECRET)


def journal_bytes(folder: Path) -> str:
    return "".join(p.read_bytes().decode("latin-1") for p in sorted(folder.iterdir()))


@pytest.mark.anyio
@pytest.mark.parametrize("expose", [False, True])
async def test_the_journal_keeps_the_message_only_under_expose_details(tmp_path: Path, expose: bool) -> None:
    journal = SQLiteJournal(tmp_path / "journal.sqlite")
    runtime = JournalRuntime(journal)
    agent_, classifier = desk(expose=expose, runtime=runtime)
    result = await agent_.run("I was charged twice", session_id="s-1")
    assert result.route == "general" and len(classifier.requests) == 2
    again = await agent_.resume("s-1")  # replays the recorded failure: the same prompt, from the journal
    assert (again.route, again.output) == (result.route, result.output) and len(classifier.requests) == 2
    teller_, _ = teller()
    await Agent("Teller.", name="teller", model=teller_.model, tools=teller_.tools, runtime=runtime).run(
        "INV-7?", session_id="s-2"
    )
    plain = Agent("Plain.", name="plain", model=FunctionModel(fails, name="plain"), runtime=runtime)
    with pytest.raises(RuntimeError):
        await plain.run("x", session_id="s-3")
    await journal.aclose()
    assert shows_secret(journal_bytes(tmp_path)) is expose


@pytest.mark.anyio
@pytest.mark.parametrize("expose", [False, True])
async def test_no_log_line_quotes_the_exception(caplog: pytest.LogCaptureFixture, expose: bool) -> None:
    caplog.set_level(logging.DEBUG, logger="jeeves_router")
    agent_, _ = desk(expose=expose, billing_model=FunctionModel(calls_lookup, name="billing"))
    await agent_.run("I was charged twice")
    agent_, _ = desk(expose=expose)
    await agent_.run("I was charged twice")
    arch = ToolLoop(recovery=Recovery(expose_details=expose, classify_error=fatal))
    with pytest.raises(RuntimeError):
        await Agent("Plain.", name="plain", model=FunctionModel(fails, name="p"), architecture=arch).run("x")
    assert caplog.records and not shows_secret(caplog.text)


@pytest.mark.anyio
@pytest.mark.parametrize("expose", [False, True])
async def test_the_explanation_model_is_never_shown_the_message(expose: bool) -> None:
    explainer = FunctionModel(lambda r: "The payment service failed; please try again.", name="explainer")
    billing = Agent("Payments.", name="billing", model=FunctionModel(fails, name="billing"))
    general = Agent("The rest.", name="general", model=FunctionModel(lambda r: "general answer", name="general"))
    recovery = Recovery(sleep=RecordedSleeps(), expose_details=expose, explain_model=explainer)
    routes = [RouterRoute("billing", billing, "payments"), RouterRoute("general", general, "the rest")]
    model = FunctionModel(classify, name="classifier")
    result = await Agent("Desk", name="desk", model=model, architecture=Router(routes=routes, recovery=recovery)).run(
        "I was charged twice"
    )
    assert result.status == "critical" and result.report is not None and len(explainer.requests) == 1
    assert ("message" in result.report["error"]) is expose  # the report shows it under expose_details
    assert not shows_secret(prompts(explainer))


@pytest.mark.anyio
async def test_a_tool_error_the_tool_raises_is_written_for_the_model_and_shown_whatever_the_setting() -> None:
    from jeeves_router import ToolError

    @tool
    def lookup(invoice: str) -> str:
        """Look up an invoice."""
        raise ToolError("invoice ids look like INV-1234; ask the customer for the full id")

    model = FunctionModel(calls_lookup, name="teller")
    desk = Agent("Teller.", name="teller", model=model, tools=[lookup])
    events = await capture_events(desk, "what is on INV-7?")
    shown = "lookup failed: ToolError: invoice ids look like INV-1234; ask the customer for the full id"
    assert tool_result_sent(model) == shown
    assert tool_result_event(events).content == shown
