"""The observability commands: ``jeeves-router graph`` and ``jeeves-router trace``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import anyio
import typer

from .._articles import a_type
from .._files import check_output
from ..errors import UsageError
from ._errors import bad_input, flag
from ._replay import JOURNAL_HELP, KEY_ENV_HELP, no_such_session, read_journal

if TYPE_CHECKING:
    from ..agent import Agent

__all__ = ["graph_command", "import_agent", "trace_command"]


def import_agent(spec: str, *, option: str) -> Agent:
    """The agent named by ``module:attribute`` (an Agent, or a function of no arguments returning one).

    ``option`` is how the user gave it (``flag(ctx, "agent")``: ``AGENT``, ``--agent``), for the messages.

    Raises:
        UsageError: when it cannot be imported or is not an agent.
    """
    from .._targets import import_target
    from ..agent import Agent

    obj = import_target(spec, option=option, example="examples.support_desk:desk")
    if not isinstance(obj, Agent):
        raise UsageError(f"{option} {spec!r} is {a_type(obj)}, not an Agent (or a function returning one)")
    return obj


def graph_command(
    ctx: typer.Context,
    agent: Annotated[str, typer.Argument(help="The agent as module:attribute (an Agent or a function returning one).")],
) -> None:
    """Print the agent tree as a Mermaid flowchart (routes, thresholds, fallbacks, handoffs, capabilities)."""
    with bad_input(ctx):  # a factory that raises, too, is one error line
        found = import_agent(agent, option=flag(ctx, "agent"))
        text = found.graph()
    typer.echo(text, nl=False)


def trace_command(
    ctx: typer.Context,
    journal: Annotated[str, typer.Argument(help=JOURNAL_HELP)],
    session: Annotated[str, typer.Option("--session", "-s", help="The session id to show.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Where to write the HTML page.")] = Path("trace.html"),
    agent: Annotated[
        str | None, typer.Option("--agent", "-a", help="Also draw this agent's graph (module:attribute).")
    ] = None,
    key_env: Annotated[str | None, typer.Option(help=KEY_ENV_HELP)] = None,
) -> None:
    """Write one self-contained HTML page (no network) showing a recorded session step by step."""
    from ..journal.records import JournalError
    from ..journal.trace_data import SessionTrace, load_trace
    from ..journal.trace_html import render_trace_html

    async def read() -> SessionTrace:
        try:
            if session not in await store.sessions():
                raise UsageError(await no_such_session(store, session, "recorded run", flag(ctx, "session")))
            return await load_trace(store, session)
        finally:
            await store.aclose()

    with bad_input(ctx):  # any failure, an unwritable --out too, is one error line
        store = read_journal(journal, key_env, key_option=flag(ctx, "key_env"))
        check_output(out, flag(ctx, "out"))
        graph = None
        if agent is not None:
            from ..graph import agent_graph

            graph = agent_graph(import_agent(agent, option=flag(ctx, "agent")))
        try:
            trace = anyio.run(read)
        except JournalError as exc:
            raise UsageError(str(exc)) from None
        page = render_trace_html(trace, graph)
        out.write_text(page, encoding="utf-8", errors="backslashreplace")  # a cut emoji: \ud83d
    steps = sum(len(run.root.walk()) for run in trace.runs)
    typer.echo(f"wrote {out} ({len(trace.runs)} run(s), {steps} steps)")
