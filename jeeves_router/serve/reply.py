"""What a chat reply says: :class:`~jeeves_router.reply.ReplyText`, the rule every front door uses.

Kept for imports from here; the rule lives in :mod:`jeeves_router.reply` (the MCP server and the
session reads use it too).
"""

from __future__ import annotations

from ..reply import ReplyText, answer_text

__all__ = ["ReplyText", "answer_text"]
