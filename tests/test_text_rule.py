r"""The one rule for text entering the library (``jeeves_router._text``).

An unpaired UTF-16 surrogate (``"\ud83d"``: half of an emoji, as ``json.loads`` or bytes read
as surrogate escapes give it) becomes U+FFFD; a high and a low half next to each other are
joined; valid text is returned as it is. Where the rule is applied: ``tests/test_text_surrogates.py``.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from jeeves_router import parse_classification
from jeeves_router._text import valid_json, valid_text

CUT = "I was charged twice \ud83d"  # the low half of the emoji was cut off
FIXED = "I was charged twice \ufffd"

#: Any text, surrogates (paired, unpaired, reversed) included.
texts_with_surrogates = st.text(st.characters(categories=["Cs", "Ll", "Lu", "Nd", "Zs", "So", "Po"]))


def test_an_unpaired_surrogate_becomes_the_replacement_character_and_a_split_pair_is_joined() -> None:
    assert valid_text(CUT) == FIXED
    assert valid_text("\udcff\udcfe\x00bad") == "\ufffd\ufffd\x00bad"  # stdin's undecodable bytes
    assert valid_text("a\ud83d\ude00b") == "a\U0001f600b"  # the two halves, next to each other: one emoji
    assert valid_text("\ude00\ud83d") == "\ufffd\ufffd"  # in the wrong order: two unpaired halves
    assert valid_json({"k\udc00": ["x\ud83d", 1, None, {"y": "ok"}]}) == {"k\ufffd": ["x\ufffd", 1, None, {"y": "ok"}]}


def test_valid_json_walks_dicts_lists_and_tuples_and_returns_a_valid_value_itself() -> None:
    # every model request body passes here: a valid one is neither copied nor rebuilt
    body = {"messages": [{"role": "user", "content": "caf\u00e9 \U0001f600"}], "stop": ("x",), "n": 1.5}
    assert valid_json(body) is body
    broken = {"messages": [{"content": CUT}, {"content": "fine"}], "stop": ("\udc00",), "n": None}
    assert valid_json(broken) == {"messages": [{"content": FIXED}, {"content": "fine"}], "stop": ("\ufffd",), "n": None}
    assert broken["messages"][0]["content"] == CUT  # the caller's value is left as it was


@settings(max_examples=300)
@given(texts_with_surrogates)
def test_valid_text_always_encodes_and_leaves_valid_text_as_it_is(text: str) -> None:
    out = valid_text(text)
    out.encode("utf-8")  # never raises
    assert len(out) <= len(text) and valid_text(out) is out  # a pair joined is one character
    if not any("\ud800" <= c <= "\udfff" for c in text):
        assert out is text


@settings(max_examples=300)
@given(texts_with_surrogates | st.text(st.sampled_from([*'route: billing\nconfidence 0.9{}"\\u', "\ud83d", "\udc00"])))
def test_the_classification_parser_is_total_on_text_with_surrogates(text: str) -> None:
    c = parse_classification(text, ["billing", "tech-support", "general"])
    assert 0.0 <= c.confidence <= 1.0
    assert c.route is None or c.route in ("billing", "tech-support", "general")
    assert c.status == "ok" or c.confidence == 0.0
