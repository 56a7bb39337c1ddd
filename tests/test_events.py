"""Every event kind is frozen, carries session id and path, and round-trips through JSON.

A ``run.completed`` result's metadata holds tuples (a chain's ``handoffs`` and ``agents``, a
Router's ``excluded_routes``, a Capabilities run's ``plan``...): they came back from an
``event_adapter()`` JSON round trip as lists, so the event read back (a journal, a served
stream) was not equal to the one sent. The keys are declared with their tuple types
(``results.METADATA_TUPLES``); the samples below carry them, and a property test varies them.
"""

from __future__ import annotations

import dataclasses
import typing

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jeeves_router import events as ev
from jeeves_router.events import Event, event_adapter
from jeeves_router.messages import assistant, user
from jeeves_router.results import METADATA_TUPLES, RunResult
from jeeves_router.usage import Usage

EVENT_TYPES = typing.get_args(Event)

SAMPLES: dict[type, dict[str, object]] = {
    ev.RunStarted: {"agent": "desk", "prompt": "hi"},
    ev.RunCompleted: {
        "result": RunResult(
            output="x",
            status="ok",
            session_id="s",
            route="billing",
            usage=Usage(1, 2, 0, 1, None),
            usage_by_route={"billing": Usage(1, 2, 0, 1, None)},
            messages=(user("hi"), assistant("x")),
            metadata={  # what the built-in architectures write, every tuple key among them
                "handoffs": ({"from": "triage", "to": "billing", "reason": "double charge"},),
                "agents": ("desk", "triage", "billing"),
                "last_agent": "billing",
                "sticky": False,
                "excluded_routes": ("technical",),
                "mode": "plan_first",
                "task": "t",
                "capabilities": ("sql", "writer"),
                "excluded": (),
                "plan": (("sql", "do sql"), ("writer", "do writer")),
                "steps": ("sql",),
                "handoff": "billing",
                "max_turns": 10,
            },
        )
    },
    ev.RunFailed: {"error_type": "Boom", "message": "m", "severity": "critical"},
    ev.TextDelta: {"text": "t"},
    ev.ToolCalled: {"call_id": "c", "tool": "t", "arguments": {"a": 1}},
    ev.ToolResult: {"call_id": "c", "tool": "t", "content": "ok"},
    ev.RouterClassified: {
        "route": "b",
        "confidence": 0.5,
        "status": "ok",
        "threshold": 0.1,
        "raw": "r",
        "runner_up": "g",
        "runner_up_confidence": 0.2,
        "margin": 0.3,
    },
    ev.RouterDispatched: {"route": "b", "child_session_id": "s__route_b"},
    ev.RouterFallback: {"reason": "low_confidence", "fallback_route": "g"},
    ev.RouterUnresolved: {"reason": "unknown_route"},
    ev.RouterCompleted: {"route": "b", "status": "ok", "usage": Usage()},
    ev.HandoffRequested: {"from_agent": "a", "to_agent": "b"},
    ev.HandoffCompleted: {"from_agent": "a", "to_agent": "b"},
    ev.HandoffRejected: {"from_agent": "a", "to_agent": "b", "why": "cycle"},
    ev.RecoveryRetry: {"operation": "model", "attempt": 1, "delay_s": 0.5, "severity": "retriable", "error": "e"},
    ev.RecoveryReclassify: {"attempt": 1, "excluded": ("b",), "error": "e"},
    ev.RecoveryReplan: {"attempt": 1, "error": "e"},
    ev.RecoveryReport: {"severity": "critical", "user_message": "sorry", "report": {"steps": [1, 2]}},
    ev.CapabilitiesSelected: {"capabilities": ("a", "b")},
    ev.CapabilityStarted: {"capability": "a"},
    ev.CapabilityCompleted: {"capability": "a", "duration_s": 0.1},
}


def test_every_event_kind_has_a_sample() -> None:
    assert set(SAMPLES) == set(EVENT_TYPES)
    kinds = [t.__dataclass_fields__["kind"].default for t in EVENT_TYPES]  # type: ignore[attr-defined]
    assert len(set(kinds)) == len(kinds)


@pytest.mark.parametrize("cls", EVENT_TYPES, ids=lambda c: c.__name__)
def test_round_trip_and_frozen(cls: type) -> None:
    event = cls(session_id="s", path=("desk", "billing"), **SAMPLES[cls])
    data = event_adapter().dump_json(event)
    back = event_adapter().validate_json(data)
    assert back == event and type(back) is cls
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.session_id = "other"  # type: ignore[misc]


def test_the_samples_carry_every_declared_metadata_tuple() -> None:
    result = SAMPLES[ev.RunCompleted]["result"]
    assert isinstance(result, RunResult) and set(METADATA_TUPLES) <= set(result.metadata)


_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=8)
_names = st.lists(_text, max_size=3).map(tuple)
_declared = {
    "handoffs": st.lists(
        st.fixed_dictionaries({"from": _text, "to": _text, "reason": st.none() | _text}), max_size=3
    ).map(tuple),
    "agents": _names,
    "excluded_routes": _names,
    "capabilities": _names,
    "excluded": _names,
    "plan": st.lists(st.tuples(_text, _text), max_size=3).map(tuple),
    "steps": _names,
}
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.floats(allow_nan=False, allow_infinity=False) | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=8,
)
_others = st.dictionaries(_text.filter(lambda k: k not in METADATA_TUPLES), _json, max_size=3)


def test_the_property_covers_every_declared_key() -> None:
    assert set(_declared) == set(METADATA_TUPLES)


@given(declared=st.fixed_dictionaries({}, optional=_declared), others=_others)  # type: ignore[arg-type]
def test_a_completed_runs_metadata_round_trips_equal(declared: dict[str, object], others: dict[str, object]) -> None:
    result = RunResult(output="x", status="ok", session_id="s", metadata={**others, **declared})
    event = ev.RunCompleted(session_id="s", path=("desk",), result=result)
    back = event_adapter().validate_json(event_adapter().dump_json(event))
    assert back == event
    assert all(type(back.result.metadata[k]) is tuple for k in declared)  # type: ignore[union-attr]
