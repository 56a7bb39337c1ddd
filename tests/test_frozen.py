"""fast_init: the data objects keep every dataclass behaviour with the cheaper constructor."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
from dataclasses import dataclass, field

import pytest

from jeeves_router import events as ev
from jeeves_router._frozen import constructor, frozen
from jeeves_router.architectures.base import RunContext, new_context
from jeeves_router.classify.types import Classification, ClassifyResult, RouteSpec
from jeeves_router.messages import Message, TextPart, ToolCallPart, assistant, text_in, tool_calls_in, user
from jeeves_router.models.base import ModelResponse
from jeeves_router.results import RunResult
from jeeves_router.usage import NO_USAGE, Usage


@frozen
class _Point:
    x: int
    y: int = 2
    tags: list[str] = field(default_factory=list)
    meta: dict[str, int] = field(default_factory=dict)
    made: tuple[int, ...] = field(default_factory=lambda: (1,))
    label: str = field(default="p", kw_only=True)


def _reference() -> type:
    """The same class as a plain dataclass, to compare against."""

    @dataclass(frozen=True, slots=True)
    class _Point:
        x: int
        y: int = 2
        tags: list[str] = field(default_factory=list)
        meta: dict[str, int] = field(default_factory=dict)
        made: tuple[int, ...] = field(default_factory=lambda: (1,))
        label: str = field(default="p", kw_only=True)

    return _Point


def test_same_signature_as_the_dataclass() -> None:
    assert str(inspect.signature(_Point)) == str(inspect.signature(_reference()))
    assert _Point.__init__.__qualname__ == "_Point.__init__"


def test_constructs_like_the_dataclass() -> None:
    ref = _reference()
    for args, kwargs in [((1,), {}), ((1, 5, ["a"]), {"label": "q"}), ((), {"x": 3, "meta": {"k": 1}})]:
        ours, theirs = _Point(*args, **kwargs), ref(*args, **kwargs)
        assert repr(ours).partition("(")[2] == repr(theirs).partition("(")[2]
        assert dataclasses.astuple(ours) == dataclasses.astuple(theirs)


def test_factories_build_a_new_object_each_time() -> None:
    a, b = _Point(1), _Point(1)
    assert a.tags == [] and a.meta == {} and a.made == (1,)
    assert a.tags is not b.tags and a.meta is not b.meta


def test_argument_errors_are_the_dataclass_ones() -> None:
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'x'"):
        _Point()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="positional"):
        _Point(1, 2, [], {}, (), "label")  # type: ignore[misc]
    with pytest.raises(TypeError, match="unexpected keyword"):
        _Point(1, nope=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="required keyword-only argument: 'text'"):
        ev.TextDelta(session_id="s", path=())  # type: ignore[call-arg]


def test_frozen_slots_eq_hash_replace_pickle_match() -> None:
    p = _Point(1, meta={"a": 1})
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.x = 2  # type: ignore[misc]
    assert not hasattr(p, "__dict__")
    assert p == _Point(1, meta={"a": 1}) and p != _Point(2)
    q = dataclasses.replace(p, y=9)
    assert (q.x, q.y, q.meta) == (1, 9, {"a": 1})
    assert pickle.loads(pickle.dumps(p)) == p and copy.deepcopy(p) == p
    match p:
        case _Point(1, 2, label=label):
            assert label == "p"
        case _:
            pytest.fail("class pattern did not match")
    usage = Usage(1, 2)
    assert hash(usage) == hash(Usage(1, 2)) and {usage: 1}[Usage(1, 2)] == 1


def test_rejects_what_it_cannot_build() -> None:
    class PostInit:
        x: int

        def __post_init__(self) -> None:
            pass

    class WithInitVar:
        x: int
        y: dataclasses.InitVar[int] = 0

    class InitFalse:
        x: int = field(default=0, init=False)

    class SelfField:
        self: int

    for cls in (PostInit, WithInitVar, InitFalse, SelfField):
        with pytest.raises(TypeError):
            frozen(cls)


def test_keyword_only_and_docstring() -> None:
    @frozen(kw_only=True)
    class Named:
        name: str
        size: int = 0

    assert str(inspect.signature(Named)) == "(*, name: 'str', size: 'int' = 0) -> None"
    assert Named.__doc__ == "Named(*, name: 'str', size: 'int' = 0)"
    assert Named(name="n") == Named(name="n", size=0)
    with pytest.raises(TypeError):
        Named("n")  # type: ignore[misc]


def test_defaults_of_the_data_objects() -> None:
    result = RunResult(output="x", status="ok", session_id="s")
    assert result.usage == Usage() and result.usage is NO_USAGE
    assert result.metadata == {} and result.metadata is not RunResult(output=None, status="ok", session_id="s").metadata
    assert ModelResponse((TextPart("a"),)).usage is NO_USAGE
    assert ClassifyResult(Classification("b", 0.9, "ok", "raw")).usage is NO_USAGE
    delta = ev.TextDelta(session_id="s", path=("a",), text="t")
    assert delta.kind == "text.delta" and isinstance(delta.ts, float)


def test_usage_addition() -> None:
    a, b = Usage(1, 2, 0, 1, 0.5), Usage(3, 4, 1, 1, 0.25)
    assert a + b == Usage(4, 6, 1, 2, 0.75)
    assert a + Usage(cost_usd=None) == Usage(1, 2, 0, 1, None)
    assert NO_USAGE + a is a and a + NO_USAGE is a and NO_USAGE + NO_USAGE is NO_USAGE
    with pytest.raises(TypeError):
        NO_USAGE + 1  # type: ignore[operator]
    with pytest.raises(TypeError):
        a + 1  # type: ignore[operator]


def test_route_spec_hash_follows_equality() -> None:
    a, b = RouteSpec("billing", "refunds"), RouteSpec("billing", "refunds")
    assert a == b and hash(a) == hash(b)
    assert len({a, b, RouteSpec("billing", "other"), RouteSpec("tech")}) == 3


def test_text_of_parts() -> None:
    call = ToolCallPart("c1", "lookup")
    assert text_in((TextPart("a"),)) == "a"
    assert text_in((call,)) == ""
    assert text_in(()) == ""
    assert text_in((TextPart("a"), call, TextPart("b"))) == "ab"
    assert Message("assistant", (TextPart("a"), call, TextPart("b"))).text == "ab"
    assert user("hi").text == "hi" and assistant("yo").text == "yo"
    assert ModelResponse((call, TextPart("z"))).text == "z"


def test_tool_calls_of_parts() -> None:
    one, two = ToolCallPart("c1", "lookup"), ToolCallPart("c2", "refund")
    assert tool_calls_in((one,)) == (one,)
    assert tool_calls_in((TextPart("a"),)) == ()
    assert tool_calls_in(()) == ()
    assert tool_calls_in((TextPart("a"), one, TextPart("b"), two)) == (one, two)
    assert Message("assistant", (one, TextPart("x"))).tool_calls == (one,)
    assert ModelResponse((one,)).tool_calls == (one,)


def test_constructor_builds_what_the_class_builds() -> None:
    make = constructor(_Point)
    ref = _reference()
    for args, kwargs in [((1,), {}), ((1, 5, ["a"]), {"label": "q"}), ((), {"x": 3, "meta": {"k": 1}})]:
        ours = make(*args, **kwargs)
        assert type(ours) is _Point and ours == _Point(*args, **kwargs)
        assert dataclasses.astuple(ours) == dataclasses.astuple(ref(*args, **kwargs))
    a, b = make(1), make(1)
    assert a.tags == [] and a.tags is not b.tags and a.made == (1,)
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.x = 2  # type: ignore[misc]
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'x'"):
        make()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="unexpected keyword"):
        make(1, nope=1)  # type: ignore[call-arg]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del a.y
    assert pickle.loads(pickle.dumps(a)) == a and hash(constructor(Usage)(1, 2)) == hash(Usage(1, 2))
    assert dataclasses.replace(a, y=5) == _Point(1, 5) and type(dataclasses.replace(a, y=5)) is _Point
    delta = constructor(ev.TextDelta)(session_id="s", path=("a",), text="t")
    assert type(delta) is ev.TextDelta and delta.kind == "text.delta" and isinstance(delta.ts, float)
    assert delta == dataclasses.replace(ev.TextDelta(session_id="s", path=("a",), text="t"), ts=delta.ts)
    assert str(inspect.signature(constructor(ev.TextDelta))).startswith("(*, session_id: 'str'")


def test_constructor_of_a_mutable_slotted_dataclass() -> None:
    ctx = new_context(agent=None, session_id="s", path=("a",), prompt="p")  # type: ignore[arg-type]
    ref = RunContext(agent=None, session_id="s", path=("a",), prompt="p")  # type: ignore[arg-type]
    assert type(ctx) is RunContext
    assert [getattr(ctx, f.name) for f in dataclasses.fields(ctx) if f.name != "ledger"] == [
        getattr(ref, f.name) for f in dataclasses.fields(ref) if f.name != "ledger"
    ]
    assert ctx.context == {} and ctx.context is not new_context(agent=None, session_id="s", path=(), prompt="").context  # type: ignore[arg-type]
    assert ctx.ledger is not ref.ledger
    ctx.prompt = "q"
    assert ctx.prompt == "q"


def test_constructor_needs_a_dataclass_it_can_fill() -> None:
    class Plain:
        pass

    @dataclass(frozen=True)
    class FrozenWithDict:
        x: int

    @dataclass
    class Mutable:
        x: int
        y: list[int] = field(default_factory=list)

    for cls in (Plain, FrozenWithDict, 3):
        with pytest.raises(TypeError):
            constructor(cls)  # type: ignore[arg-type]
    assert constructor(Mutable)(1) == Mutable(1, [])
