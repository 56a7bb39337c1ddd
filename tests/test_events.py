"""Every event kind is frozen, carries session id and path, and round-trips through JSON."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from jeeves_router import events as ev
from jeeves_router.events import Event, event_adapter
from jeeves_router.results import RunResult
from jeeves_router.usage import Usage

EVENT_TYPES = typing.get_args(Event)

SAMPLES: dict[type, dict[str, object]] = {
    ev.RunStarted: {"agent": "desk", "prompt": "hi"},
    ev.RunCompleted: {"result": RunResult(output="x", status="ok", session_id="s", usage=Usage(1, 2, 0, 1, None))},
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
