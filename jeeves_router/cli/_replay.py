"""The ``jeeves-router replay JOURNAL --session S`` command.

The journal (and pydantic with it) is imported when the command runs, not when the command
line is built: other commands never load it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from .._env import secret_from_env
from ..errors import UsageError
from ._errors import bad_input

__all__ = ["journal_key", "replay_command"]


def journal_key(key_env: str | None) -> bytes | None:
    """The key of ``SQLiteJournal(path, key=...)`` held by environment variable ``key_env`` (its UTF-8 bytes).

    Raises:
        UsageError: if the variable is unset or empty.
    """
    key = secret_from_env(key_env, option="--key-env")
    return key.encode("utf-8", "surrogateescape") if key is not None else None


def replay_command(
    journal: Annotated[Path, typer.Argument(help="The SQLite journal file (JournalRuntime(SQLiteJournal(path))).")],
    session: Annotated[str, typer.Option("--session", "-s", help="The session id whose recorded events to print.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON event per line instead of text.")] = False,
    key_env: Annotated[
        str | None,
        typer.Option(
            help="Environment variable holding the journal's key, if it was written with SQLiteJournal(key=...)."
        ),
    ] = None,
) -> None:
    """Print the recorded event stream of a session (no model is called)."""
    import anyio

    from ..events import event_adapter
    from ..journal.records import JournalError, json_text
    from ..journal.replay import format_event, recorded_events
    from ..journal.sqlite import SQLiteJournal

    async def read() -> list[str]:
        store = SQLiteJournal(journal, create=False, key=key)
        try:
            events = await recorded_events(store, session)
        finally:
            await store.aclose()
        if as_json:
            adapter = event_adapter()
            return [json_text(adapter.dump_python(ev, mode="json")) for ev in events]
        return [format_event(ev) for ev in events]

    with bad_input():  # any failure is one error line
        key = journal_key(key_env)
        try:
            lines = anyio.run(read)
        except JournalError as exc:
            raise UsageError(str(exc)) from None
    if not lines:
        typer.echo(f"error: session {session!r} has no recorded events in {journal}", err=True)
        raise typer.Exit(2)
    for line in lines:
        typer.echo(line)
