"""Who closes a model's HTTP client: the servers close what their agents' models built, never a client passed in."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import pytest

from jeeves_router import Agent, Router, RouterRoute, ToolLoop
from jeeves_router._models_held import aclose_models
from jeeves_router.architectures.capabilities.architecture import Capabilities, Capability
from jeeves_router.mcp import server as mcp_server
from jeeves_router.models import registry
from jeeves_router.models.base import Model
from jeeves_router.models.openai import OpenAIModel
from jeeves_router.recovery import Recovery
from jeeves_router.serve import create_app
from jeeves_router.testing import FunctionModel, RecordedSleeps
from tests.loopback import FAKE_OPENAI_KEY, LoopbackServer, Reply, loopback  # noqa: F401

CHAT = {"model": "helper", "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Callable[[str], Model]], list[Model]]]:
    """Register the ``"loop:<model>"`` strings for one test; the models built for them are listed."""
    monkeypatch.setattr(registry, "_CUSTOM", dict(registry._CUSTOM))

    def register(factory: Callable[[str], Model]) -> list[Model]:
        built: list[Model] = []

        def build(name: str) -> Model:
            built.append(factory(name))
            return built[-1]

        registry.register_provider("loop", build)
        return built

    yield register


def on_loopback(loopback: LoopbackServer) -> Callable[[str], Model]:  # noqa: F811
    return lambda name: OpenAIModel(name, base_url=loopback.openai_base_url, api_key=FAKE_OPENAI_KEY)


@asynccontextmanager
async def serving(app: Any) -> AsyncIterator[httpx2.AsyncClient]:
    """``app`` started and stopped (its lifespan) around an HTTP client that calls it in-process."""
    async with app.router.lifespan_context(app):
        async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url="http://app") as http:
            yield http


@pytest.mark.anyio
async def test_the_served_app_closes_the_clients_its_agents_models_built_when_it_stops(
    loopback: LoopbackServer,  # noqa: F811
    provider: Callable[[Callable[[str], Model]], list[Model]],
) -> None:
    loopback.script(Reply(text="general"), Reply(text="hello"))
    built = provider(on_loopback(loopback))
    helper = Agent("You answer.", name="general", model="loop:answerer")
    classifier_reply = json.dumps({"route": "general", "confidence": 0.9})
    desk = Agent(
        "Desk",
        name="helper",
        model=FunctionModel(lambda request: classifier_reply, name="classifier"),
        architecture=Router([RouterRoute("general", helper, "anything")], fallback_route="general"),
    )
    async with serving(create_app(desk)) as http:
        reply = await http.post("/v1/chat/completions", json=CHAT)
        assert reply.status_code == 200
        [model] = built
        client = model._client  # type: ignore[attr-defined]
        assert client is not None and not client.is_closed()
    assert client.is_closed()  # its pooled connections are gone with the server's loop


@pytest.mark.anyio
async def test_the_served_app_leaves_a_client_passed_to_a_model_open(loopback: LoopbackServer) -> None:  # noqa: F811
    loopback.script(Reply(text="hello"))
    async with loopback.openai_client() as given:
        model = OpenAIModel("answerer", client=given)
        async with serving(create_app(Agent("You answer.", name="helper", model=model))) as http:
            assert (await http.post("/v1/chat/completions", json=CHAT)).status_code == 200
        assert not given.is_closed()  # the caller's client is the caller's to close
        assert len(loopback.requests) == 1


@pytest.mark.anyio
async def test_the_mcp_server_closes_the_clients_its_agents_models_built_when_it_stops(
    loopback: LoopbackServer,  # noqa: F811
    provider: Callable[[Callable[[str], Model]], list[Model]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    loopback.script(Reply(text="hello"))
    built = provider(on_loopback(loopback))
    agent = Agent("You answer.", name="helper", model="loop:answerer")
    seen: list[bool] = []

    class OneCall:
        """Stands in for the MCP transport: one run of the agent, as an ``ask`` call makes."""

        def __init__(self, served: Agent, **options: object) -> None:
            self.served = served

        async def run_stdio_async(self) -> None:
            assert (await self.served.run("hi")).output == "hello"
            seen.append(built[0]._client.is_closed())  # type: ignore[attr-defined]

    monkeypatch.setattr(mcp_server, "router_server", OneCall)
    await mcp_server.serve(agent)
    [model] = built
    assert seen == [False] and model._client is None  # type: ignore[attr-defined]


@pytest.mark.anyio
async def test_capabilities_resolve_a_model_string_once_for_all_their_runs(
    provider: Callable[[Callable[[str], Model]], list[Model]],
) -> None:
    def answer(request: Any) -> str:
        system = request.system or ""
        if system.startswith("You decide whether"):
            return "yes"
        if system.startswith("You plan"):
            return json.dumps({"steps": [{"capability": "lookup", "task": "look it up"}]})
        return "the task"

    built = provider(lambda name: FunctionModel(answer, name=name))

    async def lookup(call: Any) -> str:
        return "found"

    arch = Capabilities(
        [Capability("lookup", lookup, "looks things up")],
        classifier_model="loop:selector",
        orchestrator_model="loop:planner",
        recovery=Recovery(sleep=RecordedSleeps()),
    )
    agent = Agent("Orchestrator", name="desk", architecture=arch)
    for _ in range(3):
        assert (await agent.run("find it")).output == "found"
    # one adapter per string, kept: a new one per run would build (and leave open) a client per run
    assert sorted(m.name for m in built) == ["test:planner", "test:selector"]


class ClosableModel(FunctionModel):
    """A test model that counts its ``aclose()`` calls, as an adapter's would close its client."""

    def __init__(self, reply: str, *, name: str) -> None:
        super().__init__(lambda request: reply, name=name)
        self.closed = 0

    async def aclose(self) -> None:
        self.closed += 1


@pytest.mark.anyio
async def test_closing_a_tree_reaches_each_model_it_resolved_from_a_string_once(
    provider: Callable[[Callable[[str], Model]], list[Model]],
) -> None:
    replies = {
        "classifier": json.dumps({"route": "caps", "confidence": 0.9}),
        "selector": "yes",
        "planner": json.dumps({"steps": [{"capability": "leaf", "task": "do it"}]}),
        "leaf": "done",
    }
    built = provider(lambda name: ClosableModel(replies[name], name=name))
    leaf = Agent("You do it.", name="leaf", model="loop:leaf")
    caps = Agent(
        "Orchestrator",
        name="caps",
        architecture=Capabilities(
            [Capability("leaf", leaf, "does it")],
            classifier_model="loop:selector",
            orchestrator_model="loop:planner",
            recovery=Recovery(sleep=RecordedSleeps()),
        ),
    )
    desk = Agent(
        "Desk",
        name="desk",
        architecture=Router([RouterRoute("caps", caps, "everything")], classifier_model="loop:classifier"),
    )
    assert (await desk.run("go")).output == "done"
    assert sorted(m.name for m in built) == ["test:classifier", "test:leaf", "test:planner", "test:selector"]
    await aclose_models([desk, caps])  # caps twice (served on its own too): still closed once
    assert [m.closed for m in built] == [1, 1, 1, 1]  # type: ignore[attr-defined]


class BrokenClose(ClosableModel):
    """A model whose ``aclose()`` fails (a transport that errors while closing)."""

    async def aclose(self) -> None:
        await super().aclose()
        raise OSError("connection reset while closing")


@pytest.mark.anyio
async def test_a_model_that_fails_to_close_does_not_leave_the_others_open(caplog: pytest.LogCaptureFixture) -> None:
    broken = BrokenClose("a", name="broken")
    others = [ClosableModel("b", name="spec"), ClosableModel("c", name="other")]
    spec = Agent("Specialist", name="spec", model=others[0])
    desk = Agent(
        "Desk",
        name="desk",
        model=others[1],
        architecture=Router([RouterRoute("spec", spec, "everything")], classifier_model=broken),
    )
    with caplog.at_level("WARNING", logger="jeeves_router.models"):
        await aclose_models([desk])
    assert (broken.closed, [m.closed for m in others]) == (1, [1, 1])
    [record] = [r for r in caplog.records if r.message == "closing a model failed"]
    assert (record.model, record.error_type) == ("test:broken", "OSError")  # type: ignore[attr-defined]


@pytest.mark.anyio
async def test_closing_a_tree_reaches_the_explain_models_of_its_recoveries() -> None:
    """``Recovery(explain_model=...)`` of a router, a tool loop, a chain's turns or Capabilities is closed too.

    It was left out of the models a tree holds: a served desk whose recovery explained a report
    left that model's HTTP client open when the server stopped.
    """
    explainers = [ClosableModel("Sorry.", name=f"explainer-{i}") for i in range(4)]
    recoveries = [Recovery(explain_model=m, sleep=RecordedSleeps()) for m in explainers]

    async def lookup(call: Any) -> str:
        return "found"

    looping = Agent(
        "You answer.",
        name="looping",
        model=ClosableModel("hi", name="a"),
        architecture=ToolLoop(recovery=recoveries[0]),
    )
    target = Agent("You help.", name="target", model=ClosableModel("hi", name="b"))
    chained = Agent(
        "You hand on.",
        name="chained",
        model=ClosableModel("hi", name="c"),
        handoffs=[target],
        architecture=ToolLoop(recovery=recoveries[1]),
    )
    selecting = Capabilities([Capability("lookup", lookup, "looks")], recovery=recoveries[2])
    caps = Agent("Caps.", name="caps", model=ClosableModel("yes", name="d"), architecture=selecting)
    routes = [
        RouterRoute("looping", looping, "a"),
        RouterRoute("chained", chained, "b"),
        RouterRoute("caps", caps, "c"),
    ]
    desk = Agent(
        "Desk", name="desk", model=ClosableModel("x", name="e"), architecture=Router(routes, recovery=recoveries[3])
    )
    await aclose_models([desk])
    assert [m.closed for m in explainers] == [1, 1, 1, 1]
