"""`kickside config`, and the command line's side of the one option table.

The options themselves (flag, ``KICKSIDE_*`` variable, file key, default, parser) are the
engine's :data:`~kickside_engine.runtime.OPTIONS`; here they become Typer options
(:func:`option`, :func:`with_options`), and the flags a run was given become the first layer of
the engine's precedence path (:func:`given_flags`). A value given on the command line is told
from one taken from the environment or the default by Click's parameter source.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Annotated, Any, TypeVar, get_type_hints

import typer
from rich.markup import escape

from kickside_engine.config import default_sqlite_path, display_url
from kickside_engine.runtime import CONFIG_ENV, OPTIONS, Option, Resolved, ResolvedConfig
from kickside_tui.cli import output
from kickside_tui.cli.context import handles_errors, state
from kickside_tui.cli.options import JsonOption

F = TypeVar("F", bound=Callable[..., Any])
OPTION = {o.name: o for o in OPTIONS}
#: The options ``kickside worker`` takes (and ``kickside config`` previews).
WORKER = tuple(o.name for o in OPTIONS if o.section == "worker")


def _help(spec: Option) -> str:
    default = spec.show(None) if spec.default is None else spec.show(spec.parse(spec.default, ""))
    return escape(f"{spec.help} [env var: {spec.env}] [default: {default.strip('()')}]")


def option(name: str, *, envvar: bool = False, **extra: Any) -> Any:
    """The Typer option of table entry ``name``: a ``--x/--no-x`` flag for a boolean, else a
    text option parsed by the engine (so a flag, a variable and a file key get one message).

    ``envvar``: Click reads the variable too (the global options, which other code reads
    before the table is resolved); the value is still resolved by the engine.
    """
    spec = OPTION[name]
    decls = [f"{spec.flag}/--no-{spec.flag[2:]}"] if isinstance(spec.default, bool) else [spec.flag]
    return typer.Option(
        *decls,
        metavar=spec.metavar,
        envvar=spec.env if envvar else None,
        show_envvar=False,
        show_default=False,
        help=_help(spec),
        **extra,
    )


def _annotation(name: str) -> Any:
    """``Annotated[type, option(name)]`` for a command's signature."""
    kind = bool if isinstance(OPTION[name].default, bool) else str | None
    return Annotated[kind, option(name)]


def file_option(**extra: Any) -> Any:
    """The ``--config PATH`` option (the configuration file; the engine reads its variable)."""
    return typer.Option(
        "--config",
        metavar="PATH",
        show_default=False,
        help=escape(
            "The configuration file: a kickside.toml, or a pyproject.toml with a "
            f"[tool.kickside] table. It must exist. [env var: {CONFIG_ENV}] [default: "
            "kickside.toml or pyproject.toml with [tool.kickside] in the current directory or "
            "the nearest above it]"
        ),
        **extra,
    )


def with_options(names: Iterable[str]) -> Callable[[F], F]:
    """Give a command taking ``**given`` the options ``names`` of the table, after ``ctx``.

    Typer reads a command's options from its signature: this writes them there, so the table
    stays the one list.
    """

    def decorate(func: F) -> F:
        signature = inspect.signature(func, eval_str=True)
        hints = get_type_hints(func, include_extras=True)
        own = [p for p in signature.parameters.values() if p.kind is not p.VAR_KEYWORD]
        added = [
            inspect.Parameter(
                n,
                inspect.Parameter.KEYWORD_ONLY,
                default=False if isinstance(OPTION[n].default, bool) else None,
                annotation=_annotation(n),
            )
            for n in names
        ]
        params = [*own[:1], *added, *(p.replace(kind=p.KEYWORD_ONLY) for p in own[1:])]
        func.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
        func.__annotations__ = {**hints, **{p.name: p.annotation for p in added}}
        return func

    return decorate


def given_flags(ctx: typer.Context, values: Mapping[str, Any]) -> dict[str, Any]:
    """The options in ``values`` that were given on the command line (not defaults)."""
    return {
        name: value
        for name, value in values.items()
        if getattr(ctx.get_parameter_source(name), "name", None) == "COMMANDLINE"
    }


def _shown(resolved: ResolvedConfig, name: str) -> str:
    entry = resolved.options[name]
    if name == "database_url" and entry.value is None:
        return display_url(f"sqlite:///{default_sqlite_path()}")
    return entry.show()


def _source(source: str, origin: str) -> str:
    return {"flag": f"flag {origin}", "env": f"env {origin}", "file": f"file {origin}"}.get(
        source, "default"
    )


def _entries(resolved: ResolvedConfig) -> list[tuple[str, Resolved]]:
    """The options in table order, the SQLite synchronous mode after the database URL (it has
    no flag nor key: it comes from the URL's ``?synchronous=`` or its variable)."""
    entries = list(resolved.options.items())
    synchronous = resolved.sqlite_synchronous
    if synchronous is not None:
        at = next((i + 1 for i, (n, _) in enumerate(entries) if n == "database_url"), 0)
        entries.insert(at, (synchronous.option.name, synchronous))
    return entries


def _text(resolved: ResolvedConfig, name: str, entry: Resolved) -> str:
    return _shown(resolved, name) if name in resolved.options else entry.show()


def _document(resolved: ResolvedConfig) -> dict[str, Any]:
    """``kickside config --json``: the file, and each option's value and source."""
    file = resolved.file
    return {
        "file": None if file is None else {"path": str(file.path), "found_by": file.found_by},
        "options": [
            {
                "name": name,
                "value": (
                    _text(resolved, name, entry)
                    if entry.option.secret
                    else output.to_jsonable(entry.value)
                ),
                "text": _text(resolved, name, entry),
                "source": entry.source,
                "origin": entry.origin,
                "flag": entry.option.flag or None,
                "env": entry.option.env,
                "key": entry.option.key or None,
            }
            for name, entry in _entries(resolved)
        ],
    }


@with_options(WORKER)
@handles_errors
def config_command(ctx: typer.Context, as_json: JsonOption = False, **given: Any) -> None:
    """Show the effective configuration and where each value came from (flag, environment,
    file or default); passwords masked. Never opens the database. On SQLite it shows the
    synchronous mode too (the URL's ?synchronous=, else KICKSIDE_SQLITE_SYNCHRONOUS, else
    normal).

    Takes the options of `kickside worker`, to preview what they change. Exits 2 when the
    configuration file or a value in it is invalid.
    """
    resolved = state(ctx).settings(given_flags(ctx, given))
    file = resolved.file
    if as_json:
        output.emit_json(_document(resolved))
        return
    if file is None:
        output.plain(
            "configuration file: none (no --config or KICKSIDE_CONFIG, and no kickside.toml "
            "or pyproject.toml with [tool.kickside] here or above)"
        )
    else:
        how = "found" if file.found_by == "search" else f"from {file.found_by}"
        output.plain(f"configuration file: {file.path} ({how})")
    output.table(
        None,
        ("option", output.Column("value", flex=True), "source"),
        [
            [name, _text(resolved, name, entry), _source(entry.source, entry.origin)]
            for name, entry in _entries(resolved)
        ],
    )
