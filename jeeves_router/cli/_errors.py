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

__all__ = ["OneLineErrors", "VERBOSE", "bad_input", "flag"]


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


def _typed(param: Any) -> str | None:
    """How the user types ``param``: an option's longest ``--name``; an argument's name in capitals (``TARGET``)."""
    if param.param_type_name == "argument":
        return str(param.name).upper()
    flags = [o for o in param.opts if o.startswith("--")]
    return max(flags, key=len) if flags else None


def flag(ctx: typer.Context, name: str) -> str:
    """How the user types the command's parameter ``name``: ``flag(ctx, "save_to")`` is ``--out``.

    Every error message of a command names its options through this (or through
    :attr:`UsageError.argument`, which :func:`bad_input` turns into the option), never by a
    spelling of its own, so a renamed option cannot leave a message naming one that is gone.

    Raises:
        LookupError: When the command has no such parameter (a renamed parameter: a bug).
    """
    for param in ctx.command.params:
        if param.name == name:
            typed = _typed(param)
            if typed is not None:
                return typed
    raise LookupError(f"`{ctx.command_path}` has no parameter {name!r}")


def _file_option(path: str, ctx: typer.Context) -> str | None:
    """The one option of the command that was given the file ``path`` (``None``: none, or several)."""
    found = [
        typed
        for p in ctx.command.params
        if p.param_type_name == "option"
        and p.name is not None
        and ctx.params.get(p.name) is not None
        and str(ctx.params[p.name]) == path
        and (typed := _typed(p)) is not None
    ]
    return found[0] if len(found) == 1 else None


def _as_typed(exc: UsageError, ctx: typer.Context | None) -> str:
    """``exc``'s message, naming the flag the user typed for the argument it is about.

    A library check names its Python argument (:attr:`UsageError.argument`, ``grace_s``); the
    command's parameter of that name is the option the user typed (``--grace``), so the message
    names that instead. An error about a file that names it first (a
    :class:`~jeeves_router.eval.DataFileError`: ``FILE: file not found``) names the option that
    was given the file (``--fit-on FILE: file not found``). Errors about no argument, or none of
    the command's options, are left as they are.
    """
    message = str(exc)
    if ctx is None:
        return message
    name = exc.argument
    path = getattr(exc, "path", None)
    if name is None and isinstance(path, str) and message.startswith(path):
        option = _file_option(path, ctx)
        return message if option is None else f"{option} {message}"
    params = ctx.command.params if name is not None else ()
    flags = [f for p in params if p.name == name and p.param_type_name == "option" and (f := _typed(p)) is not None]
    if name is None or not flags:
        return message
    if message.startswith(name + " "):
        return flags[0] + message[len(name) :]
    return f"{flags[0]}: {message}"


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
