"""`kickside migrate`: upgrade the schema, show its status, or go down to a revision."""

from __future__ import annotations

from typing import Annotated

import typer

from kickside_engine import migrate
from kickside_tui.cli import output
from kickside_tui.cli.context import handles_errors, state, writes

app = typer.Typer(help="Create or upgrade Kickside's tables (or inspect and downgrade them).")

JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON document.")]


def _report(st: migrate.MigrationStatus, as_json: bool, verb: str | None = None) -> None:
    if as_json:
        output.emit_json(
            {
                "current": st.current,
                "head": st.head,
                "pending": list(st.pending),
                "up_to_date": st.up_to_date,
                "oldest_code_head": st.oldest_code_head,
                "stopped_by_upgrade": [
                    {
                        "name": n.name,
                        "host": n.host,
                        "pid": n.pid,
                        "code_version": n.code_version,
                        "schema_head": n.schema_head,
                    }
                    for n in st.stopped_by_upgrade
                ],
            }
        )
        return
    if verb:
        output.info(verb)
    output.info(f"current revision: {st.current or '(none)'}")
    output.info(f"head revision:    {st.head}")
    if st.pending:
        output.info(f"pending:          {', '.join(st.pending)}")
        output.info(f"upgraded, runs:   code whose schema head is {st.oldest_code_head} or newer")
        if not st.stopped_by_upgrade:
            output.info("would stop:       no running node")
        for n in st.stopped_by_upgrade:
            head = n.schema_head or "unknown (not published)"
            output.info(
                f"would stop:       {n.name} on {n.host} (pid {n.pid}, code "
                f"{n.code_version or 'unknown'}, schema head {head})"
            )


@app.callback(invoke_without_command=True)
@handles_errors
def upgrade(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """Upgrade the schema to the newest revision (a current database is left untouched)."""
    if ctx.invoked_subcommand is not None:
        return
    _upgrade(ctx, as_json)


@writes
def _upgrade(ctx: typer.Context, as_json: bool) -> None:
    db = state(ctx).database(create=True)  # a new SQLite file (and folder) is made here
    before = migrate.status(db)
    st = migrate.upgrade(db)
    verb = "already up to date" if before.up_to_date else f"upgraded to {st.head}"
    _report(st, as_json, verb)


@app.command("status")
@handles_errors
def show_status(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """Show the current and newest revisions; exit 1 when an upgrade is pending."""
    st = migrate.status(state(ctx).database())
    _report(st, as_json)
    if not st.up_to_date:
        raise typer.Exit(1)


@app.command("down")
@handles_errors
@writes
def down(
    ctx: typer.Context,
    revision: Annotated[str, typer.Argument(help="Target revision, or 'base' to drop all.")],
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask for confirmation.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Downgrade the schema to REVISION ('base' removes every Kickside table and its data)."""
    db = state(ctx).database()
    if not yes:
        from kickside_tui.cli.confirm import confirm_or_refuse

        confirm_or_refuse(f"Downgrade {db.display_url()} to {revision}? Data may be lost.")
    st = migrate.downgrade(db, revision)
    _report(st, as_json, f"downgraded to {st.current or 'base'}")
