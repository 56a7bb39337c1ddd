"""Hypothesis strategies shared by the tests (built directly, never by filtering)."""

from __future__ import annotations

from hypothesis import strategies as st

_ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_WORDS = st.text(alphabet=_ALNUM, min_size=1, max_size=8)


def _join(first: str, rest: list[tuple[str, str]]) -> str:
    return first + "".join(sep + word for sep, word in rest)


#: Valid route names (``ids.ROUTE_NAME_PATTERN``, at most 48 characters): letters and digits
#: joined by single ``-`` or ``_``. Built from words, so no example is ever rejected.
route_names = st.builds(
    _join,
    st.text(alphabet=_ALNUM, min_size=1, max_size=12),
    st.lists(st.tuples(st.sampled_from("-_"), _WORDS), max_size=4),
)
