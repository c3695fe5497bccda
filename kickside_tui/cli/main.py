"""The `kickside` command: operator reads and actions over the engine's public API."""

from __future__ import annotations

from typing import Annotated

import typer

from kickside_tui.cli import (
    audit,
    bulk,
    capacity,
    config,
    cron,
    demo,
    doctor,
    enqueue,
    explain,
    job_actions,
    jobs,
    leases,
    migrate,
    nodes,
    output,
    prune,
    purge,
    queues,
    slots,
    stats,
    worker,
    workflows,
)
from kickside_tui.cli.context import EXIT_CODES_HELP, CliState
from kickside_tui.cli.grammar import KicksideGroup

app = typer.Typer(
    name="kickside",
    cls=KicksideGroup,
    help=f"Kickside: a durable, database-backed job engine.\n\n{EXIT_CODES_HELP}",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


#: The root's parameters, by the CliState field each sets.
_GIVEN = {
    "database_url": "database_url",
    "schema": "schema",
    "read_only": "read_only",
    "config_file": "config_file",
    "as_json": "json",
    "wide": "wide",
}


@app.callback()
def root(
    ctx: typer.Context,
    database_url: Annotated[str | None, config.option("database_url", envvar=True)] = None,
    schema: Annotated[str | None, config.option("schema", envvar=True)] = None,
    read_only: Annotated[bool, config.option("read_only", envvar=True)] = False,
    config_file: Annotated[str | None, config.file_option()] = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Every command prints one JSON document on stdout: its result, or "
            '{"error": {"code", "message", "exit_code", "details"}}.',
        ),
    ] = False,
    wide: Annotated[
        bool,
        typer.Option("--wide", help="Tables with every column and full job ids, however wide."),
    ] = False,
) -> None:
    """Options shared by every command (each also takes them after its name)."""
    given = {
        option
        for param, option in _GIVEN.items()
        if getattr(ctx.get_parameter_source(param), "name", None) == "COMMANDLINE"
    }
    ctx.obj = CliState(
        database_url=database_url,
        schema=schema,
        read_only=read_only,
        json=as_json,
        wide=wide,
        config_file=config_file,
        given=given,
    )
    output.configure(wide=wide)
    ctx.call_on_close(ctx.obj.close)


app.add_typer(migrate.app, name="migrate")
app.command("worker")(worker.worker)
app.command("reload")(worker.reload)

# Flat verbs act on one job or slot; nouns list (and group their actions).
app.command("enqueue")(enqueue.enqueue_command)
app.command("jobs")(jobs.jobs)
app.command("job")(jobs.job)
app.command("explain")(explain.explain)
app.command("wake")(job_actions.wake)
app.command("park")(job_actions.park)
app.command("resume")(job_actions.resume)
app.command("retry")(job_actions.retry)
app.command("cancel")(job_actions.cancel)
app.command("discard")(job_actions.discard)
app.command("delete")(job_actions.delete)
app.add_typer(bulk.app, name="bulk")
app.command("purge-slot")(purge.purge_slot)
app.command("slots")(slots.slots)
app.command("leases")(leases.leases)
app.add_typer(queues.app, name="queues")
app.add_typer(capacity.app, name="capacity")
app.command("nodes")(nodes.nodes)
app.command("cron")(cron.cron)
app.command("stats")(stats.stats)
app.command("prune")(prune.prune)
app.command("audit")(audit.audit)
app.command("doctor")(doctor.doctor)
app.command("config")(config.config_command)
app.add_typer(workflows.app, name="workflow")
app.command("demo")(demo.demo)


def main() -> None:
    """Console-script entry point."""
    app()
