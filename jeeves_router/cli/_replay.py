"""The ``jeeves-router replay JOURNAL --session S`` command.

The journal (and pydantic with it) is imported when the command runs, not when the command
line is built: other commands never load it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from .._env import secret_from_env
from ..errors import UsageError
from ._errors import bad_input, flag

if TYPE_CHECKING:
    from ..journal.base import Journal

__all__ = ["JOURNAL_HELP", "KEY_ENV_HELP", "no_such_session", "read_journal", "replay_command"]


def read_journal(spec: str, key_env: str | None, *, key_option: str) -> Journal:
    """The journal ``replay`` and ``trace`` read: a SQLite file or a ``postgresql://`` URL, as ``--journal`` takes.

    Args:
        spec: The file or URL.
        key_env: The environment variable holding a SQLite journal's key (``SQLiteJournal(path, key=...)``,
            its text as UTF-8), if it was written with one.
        key_option: How the user gave ``key_env`` (``flag(ctx, "key_env")``), for the messages.

    Raises:
        UsageError: for a file that is no journal, an unset variable, or a key for a PostgreSQL journal.
    """
    from ..journal.attach import is_postgres_url, open_journal

    if key_env is not None and is_postgres_url(spec):
        raise UsageError(
            "a PostgreSQL journal has no key (its entries carry no checksum); leave it out", argument="key_env"
        )
    key = secret_from_env(key_env, option=key_option)
    return open_journal(spec, reading=True, key=key.encode("utf-8", "surrogateescape") if key is not None else None)


def _shown(store: Journal) -> str:
    """How a message names ``store``: a SQLite file by its path; a URL may hold a password, so not that."""
    from ..journal.sqlite import SQLiteJournal

    return str(store.path) if isinstance(store, SQLiteJournal) else repr(store)


async def no_such_session(store: Journal, session: str, what: str, option: str) -> str:
    """The message for a ``session`` that has no ``what`` in ``store``, naming sessions it has, for ``option``.

    Child sessions (a route's, ``desk-1__route_billing``) are left out: their parent is the one to give.
    """
    known = [s for s in await store.sessions() if "__" not in s]
    if not known:
        return f"session {session!r} has no {what} in {_shown(store)}, which has no sessions"
    listed = ", ".join(repr(s) for s in known[:5]) + (f" and {len(known) - 5} more" if len(known) > 5 else "")
    return f"session {session!r} has no {what} in {_shown(store)}; give one it has with {option}: {listed}"


#: The journal argument of ``replay`` and ``trace``.
JOURNAL_HELP = "The journal: a SQLite file or a postgresql:// URL (what serve --journal was given)."
#: Their ``--key-env`` option.
KEY_ENV_HELP = "Environment variable holding the journal's key, if it was written with SQLiteJournal(key=...)."


def replay_command(
    ctx: typer.Context,
    journal: Annotated[str, typer.Argument(help=JOURNAL_HELP)],
    session: Annotated[str, typer.Option("--session", "-s", help="The session id whose recorded events to print.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON event per line instead of text.")] = False,
    key_env: Annotated[str | None, typer.Option(help=KEY_ENV_HELP)] = None,
) -> None:
    """Print the recorded event stream of a session (no model is called)."""
    import anyio

    from ..events import event_adapter
    from ..journal.records import JournalError, json_text
    from ..journal.replay import format_event, recorded_events

    async def read() -> list[str]:
        try:
            events = await recorded_events(store, session)
            if not events:
                raise UsageError(await no_such_session(store, session, "recorded events", flag(ctx, "session")))
        finally:
            await store.aclose()
        if as_json:
            adapter = event_adapter()
            return [json_text(adapter.dump_python(ev, mode="json")) for ev in events]
        return [format_event(ev) for ev in events]

    with bad_input(ctx):  # any failure is one error line
        store = read_journal(journal, key_env, key_option=flag(ctx, "key_env"))
        try:
            lines = anyio.run(read)
        except JournalError as exc:
            raise UsageError(str(exc)) from None
    for line in lines:
        typer.echo(line)
