"""Handoff chains, with their guards (the Router follows its specialists' handoffs with them).

* :mod:`.chain` — :class:`HandoffChain`, agents passing the conversation on with
  ``transfer_to_<agent>`` tools, under ``max_handoffs`` and the cycle guard.
* :mod:`.run` / :mod:`.visit` — one run of a chain and one agent's turn in it.
* :mod:`.graph`, :mod:`.tools`, :mod:`.session` — who may hand off to whom, the generated
  tools and history modes, and where sticky sessions are kept.
"""

from .chain import HandoffChain
from .session import InMemorySessionStore, SessionStore
from .tools import HandoffInput, HistoryMode

__all__ = ["HandoffChain", "HandoffInput", "HistoryMode", "InMemorySessionStore", "SessionStore"]
