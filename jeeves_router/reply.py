"""What a run says to its user: the one rule for the text of a reply, at every front door.

The HTTP server's chat replies (streamed and whole), the MCP server's ``ask`` result and the
turns a session read shows all say the text :class:`ReplyText` builds from a run's events.
"""

from __future__ import annotations

from .events import Event, TextDelta
from .results import RunResult

__all__ = ["ReplyText", "answer_text"]


def answer_text(result: RunResult) -> str | None:
    """What a finished run answers: its output, else its recovery report's message, else ``None``.

    The report's message is :attr:`~jeeves_router.results.RunResult.user_message` (a ``critical`` /
    ``fatal`` run); ``None`` for ``unresolved``, ``max_turns``, ... (``jeeves.status`` says which).
    """
    return result.output if result.output is not None else result.user_message


class ReplyText:
    """The text of a reply, built from the run's events: one rule for every front door.

    A reply says what a streaming client is sent: every ``text.delta`` of the run, in order — also
    the text of an agent that then handed the turn on, or wrote before a tool call —, a blank line
    between pieces of text that other events separate (two agents, two model turns); then the run's
    answer (:func:`answer_text`) unless that text already ends with it: an answer that was not
    streamed (a function capability's), or a stopped run's message for the end user. A whole reply
    is that same text (:attr:`text`). :attr:`RunResult.output <jeeves_router.results.RunResult.output>`
    stays the answering agent's final text, as openai-agents' ``final_output`` is the last agent's:
    it is what a session's later turns are given as the assistant's message.
    """

    __slots__ = ("_answered", "_gap", "_parts")

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._gap = False
        self._answered = False

    def feed(self, ev: Event) -> str | None:
        """The text ``ev`` adds to the reply, or ``None``: feed every event of the run, in order."""
        return self.add(ev.text if isinstance(ev, TextDelta) else None)

    def add(self, text: str | None) -> str | None:
        """:meth:`feed` for an event already read: a ``text.delta``'s text, ``None`` for any other event."""
        if text is None:
            self._gap = bool(self._parts)
            return None
        if not text:
            return None
        if self._gap:
            text, self._gap = "\n\n" + text, False
        self._parts.append(text)
        return text

    def end(self, result: RunResult) -> str:
        """The rest of the reply once the run has ended with ``result`` (``""``: nothing more)."""
        answer = answer_text(result)
        self._answered = answer is not None
        if not answer or (result.output is not None and "".join(self._parts).endswith(answer)):
            return ""
        rest = "\n\n" + answer if self._parts else answer
        self._parts.append(rest)
        return rest

    @property
    def text(self) -> str | None:
        """Everything the reply has said (after :meth:`end`); ``None`` for a run without text or an answer."""
        return "".join(self._parts) if self._parts or self._answered else None
