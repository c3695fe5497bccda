"""The `kickside` command: operator reads and actions over the engine's public API."""

from __future__ import annotations

from typing import Annotated

import typer

from kickside_engine.config import DATABASE_URL_ENV, SCHEMA_ENV
from kickside_tui.cli import migrate
from kickside_tui.cli.context import EXIT_CODES_HELP, CliState

app = typer.Typer(
    name="kickside",
    help=f"Kickside: a durable, database-backed job engine.\n\n{EXIT_CODES_HELP}",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@app.callback()
def root(
    ctx: typer.Context,
    database_url: Annotated[
        str | None,
        typer.Option(
            "--database-url",
            envvar=DATABASE_URL_ENV,
            show_envvar=True,
            show_default=False,
            help="sqlite:///PATH or postgresql+psycopg://USER@HOST/DB "
            "(default: the embedded SQLite file).",
        ),
    ] = None,
    schema: Annotated[
        str | None,
        typer.Option(
            "--schema",
            envvar=SCHEMA_ENV,
            show_envvar=True,
            help="PostgreSQL schema for Kickside's tables.",
        ),
    ] = None,
) -> None:
    """Options shared by every command."""
    ctx.obj = CliState(database_url=database_url, schema=schema)
    ctx.call_on_close(ctx.obj.close)


app.add_typer(migrate.app, name="migrate")


def main() -> None:
    """Console-script entry point."""
    app()
