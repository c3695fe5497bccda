"""The command line's grammar, shared by every command: global options at either position,
plain help, and one error document for usage errors under ``--json``.

:class:`KicksideGroup` is the root command's class. When Typer builds the command tree it walks
every command below it once and:

- adds the global options (``--database-url``, ``--schema``, ``--read-only``, ``--config``,
  ``--wide``) to each, so ``kickside jobs --database-url URL`` works as ``kickside
  --database-url URL jobs`` does (given at both positions, the one after the command wins);
- shows flags and repeatable options without Typer's ``<bool>`` and ``<list[str]>`` labels.

Its ``main`` turns a usage error Click found (an unknown option, a missing argument) into the
CLI's error document on stdout when ``--json`` is on the command line, as every other error is.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from typing import Annotated, Any, cast

import typer
from typer import rich_utils
from typer.core import TyperGroup, TyperOption

from kickside_tui.cli import config, output
from kickside_tui.cli.context import state

GLOBAL_PANEL = "Global options (before or after the command)"


def _database_url(ctx: typer.Context, param: typer.CallbackParam, value: str | None) -> None:
    _given(ctx, param, "database_url", value)


def _schema(ctx: typer.Context, param: typer.CallbackParam, value: str | None) -> None:
    _given(ctx, param, "schema", value)


def _read_only(ctx: typer.Context, param: typer.CallbackParam, value: bool) -> None:
    _given(ctx, param, "read_only", value)


def _config_file(ctx: typer.Context, param: typer.CallbackParam, value: str | None) -> None:
    _given(ctx, param, "config_file", value)


def _wide(ctx: typer.Context, param: typer.CallbackParam, value: bool) -> None:
    _given(ctx, param, "wide", value)


def _show_help(ctx: typer.Context, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        typer.echo(ctx.get_help(), color=ctx.color)
        raise typer.Exit()


def _given(ctx: typer.Context, param: typer.CallbackParam, name: str, value: Any) -> None:
    """Store a global option given after the command in the run's state (it wins)."""
    source = ctx.get_parameter_source(param.name or "")
    if getattr(source, "name", None) == "COMMANDLINE":
        state(ctx).given_option(name, value)


_template = typer.Typer(add_completion=False)


@_template.command()
def _global_options(
    global_database_url: Annotated[
        str | None, config.option("database_url", callback=_database_url)
    ] = None,
    global_schema: Annotated[str | None, config.option("schema", callback=_schema)] = None,
    global_read_only: Annotated[bool, config.option("read_only", callback=_read_only)] = False,
    global_config_file: Annotated[str | None, config.file_option(callback=_config_file)] = None,
    global_wide: Annotated[
        bool,
        typer.Option(
            "--wide",
            callback=_wide,
            help="Tables with every column and full job ids, however wide.",
        ),
    ] = False,
) -> None:
    """Not a command: the template of the global options every command also takes."""


_help_template = typer.Typer(add_completion=False)


@_help_template.command()
def _help(
    show_help: Annotated[
        bool,
        typer.Option(
            "--help", is_eager=True, callback=_show_help, help="Show this message and exit."
        ),
    ] = False,
) -> None:
    """Not a command: the template of ``--help``, shown without a type."""


def _options(template: typer.Typer) -> list[TyperOption]:
    """Fresh copies of a template's options (their values are never passed to a command)."""
    options = []
    for param in typer.main.get_command(template).params:
        assert isinstance(param, TyperOption)
        param.expose_value = False
        options.append(param)
    return options


def global_options() -> list[TyperOption]:
    """Fresh copies of the global options, for one command."""
    options = _options(_template)
    for option in options:
        option.rich_help_panel = GLOBAL_PANEL
    return options


def _commands(command: Any) -> Iterator[Any]:
    yield command
    for sub in getattr(command, "commands", {}).values():
        yield from _commands(sub)


def _plain_help(command: Any) -> None:
    """Flags without ``<bool>``, repeatable options named by their value, ``--help`` plain."""
    if command.add_help_option and not any("--help" in p.opts for p in command.params):
        command.params.extend(_options(_help_template))
        command.add_help_option = False  # the option is there now, shown like the others
    for param in command.params:
        if not isinstance(param, TyperOption) or param.metavar is not None:
            continue
        if param.is_flag:
            param.metavar = ""
        elif param.multiple:
            long = next((o for o in param.opts if o.startswith("--")), param.opts[0])
            param.metavar = long.lstrip("-").replace("-", "_").upper()


def _add_global_options(command: Any) -> None:
    taken = {opt for p in command.params for opt in p.opts}
    for option in global_options():
        if not taken & set(option.opts):
            command.params.append(option)


def json_requested(args: Sequence[str]) -> bool:
    """Whether ``--json`` is on the command line (before a ``--``)."""
    for arg in args:
        if arg == "--":
            return False
        if arg == "--json":
            return True
    return False


class KicksideGroup(TyperGroup):
    """The root command: shares its options and help style with the whole tree (see the
    module's docstring)."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        for command in _commands(self):
            if command is not self:
                _add_global_options(command)
            _plain_help(command)

    def main(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        argv = list(sys.argv[1:] if args is None else args)
        if not standalone_mode or not json_requested(argv):
            return super().main(argv, prog_name, complete_var, standalone_mode, **extra)
        try:
            code = super().main(argv, prog_name, complete_var, False, **extra)
        except typer.TyperException as exc:
            rich_utils.rich_format_error(cast(Any, exc))  # Click's usage message, as always
            output.error_document("usage", exc.format_message(), exc.exit_code)
            sys.exit(exc.exit_code)
        except typer.Abort:
            output.error("aborted")
            output.error_document("aborted", "aborted", 1)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)
