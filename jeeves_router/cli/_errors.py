"""How the command line reports errors: one ``error:`` line on stderr and exit code 2.

Shared by every ``jeeves-router`` command: click's usage errors, our ``UsageError`` and any
unexpected failure of a command become one line (``--verbose`` keeps the traceback), and a
reader of stdout that went away (``| head``) ends the command quietly.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any, NoReturn

import typer
from typer.core import TyperGroup

from ..errors import UsageError

__all__ = ["OneLineErrors", "VERBOSE", "bad_input"]


def _reader_gone() -> NoReturn:
    """The reader of stdout went away (``| head``): end quietly with status 1, as rich does.

    Output still buffered goes to the null device, so the exit's own flush cannot fail again.
    """
    with suppress(OSError, ValueError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    sys.exit(1)


def _fail(message: str) -> NoReturn:
    typer.echo(f"error: {' '.join(message.split())}", err=True)
    sys.exit(2)


class OneLineErrors(TyperGroup):
    """A Typer group whose command-line errors are one line on stderr and exit code 2.

    Click's own usage errors (a bad option value, a missing option) would otherwise print a
    framed usage block; a script reading stderr gets one ``error: ...`` line instead.
    """

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        """Run the group; see :meth:`click.Group.main`."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, False, **extra)
        except BrokenPipeError:
            _reader_gone()
        except Exception as exc:
            # Typer vendors its own copy of click, so its errors are matched by class name.
            kinds = {k.__name__ for k in type(exc).__mro__}
            ctx = getattr(exc, "ctx", None)
            if "NoArgsIsHelpError" in kinds and ctx is not None:
                typer.echo(ctx.get_help())
                sys.exit(2)
            if "UsageError" in kinds and "ClickException" in kinds:
                where = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
                _fail(exc.format_message() + where)  # type: ignore[attr-defined]
            if "ClickException" in kinds:
                _fail(exc.format_message())  # type: ignore[attr-defined]
            if "Abort" in kinds:
                typer.echo("aborted", err=True)
                sys.exit(130)
            raise
        sys.exit(rv if isinstance(rv, int) else 0)


VERBOSE = {"on": False}


def _as_typed(exc: UsageError, ctx: typer.Context | None) -> str:
    """``exc``'s message, naming the flag the user typed for the argument it is about.

    A library check names its Python argument (:attr:`UsageError.argument`, ``grace_s``); the
    command's parameter of that name is the option the user typed (``--grace``), so the message
    names that instead. Errors about no argument, or none of the command's, are left as they are.
    """
    message = str(exc)
    params = ctx.command.params if ctx is not None else ()
    flags = [o for p in params if p.name == exc.argument for o in p.opts if o.startswith("--")]
    if exc.argument is None or not flags:
        return message
    flag = max(flags, key=len)
    if message.startswith(exc.argument + " "):
        return flag + message[len(exc.argument) :]
    return f"{flag}: {message}"


@contextmanager
def bad_input(ctx: typer.Context | None = None) -> Iterator[None]:
    """Turn misuse, and any failure of the command, into one ``error:`` line and exit code 2.

    With ``--verbose`` an unexpected exception keeps its traceback. Given the command's
    context, an error about one argument names the command's option for it (:func:`_as_typed`):
    a command names its parameters as the library names its arguments, so the library's own
    checks serve the command line too.
    """
    try:
        yield
    except UsageError as exc:
        _fail(_as_typed(exc, ctx))
    except (typer.Exit, BrokenPipeError):  # typer's click raises this Exit; a closed stdout ends quietly
        raise
    except Exception as exc:  # the CLI's last line of defence
        if VERBOSE["on"]:
            raise
        inner: BaseException = exc
        subs = getattr(inner, "exceptions", None)  # an exception group: report its first leaf
        while isinstance(subs, tuple) and subs and isinstance(subs[0], BaseException):
            inner = subs[0]
            subs = getattr(inner, "exceptions", None)
        if isinstance(inner, UsageError):
            _fail(_as_typed(inner, ctx))
        _fail(f"{type(inner).__name__}: {inner} (run with --verbose for the traceback)")
