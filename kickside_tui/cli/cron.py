"""`kickside cron`: the cron schedule the running nodes publish, with next and last runs.

Every pool publishes the entries it runs on its heartbeat, so without options the command
shows production's schedule, merged across the nodes whose heartbeat is fresh, and which nodes
run each entry. ``--app MODULE`` reads a schedule from the application's code instead (imported
from the current directory, like ``kickside worker``): the module's ``SCHEDULE``, a sequence of
:class:`kickside_engine.plugins.cron.Recurring` (``module:attribute`` names another attribute).
With neither, a database that ``kickside demo`` filled shows the demo's schedule.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from kickside_engine.control import cron_status, load_schedule, running_schedule
from kickside_tui.cli import output
from kickside_tui.cli.context import app_spec, handles_errors, now, open_database
from kickside_tui.cli.documents import short_time
from kickside_tui.cli.options import JsonOption
from kickside_tui.cli.output import Column
from kickside_tui.demo.marker import filled_by_demo

#: ``source`` of the entries the running nodes publish.
RUNNING_NODES = "running nodes"


@handles_errors
def cron(
    ctx: typer.Context,
    app: Annotated[
        str | None,
        typer.Option(
            "--app",
            help="Read the schedule from the app's code: its SCHEDULE, a sequence of Recurring "
            "(module or module:attribute). Default: what the running nodes publish.",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Show each cron entry: expression, timezone, nodes, next run, last run and its job."""
    db = open_database(ctx)
    at = now()
    if app is not None:
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())  # like `python -m`: the app module is found here
        statuses, source = cron_status(db, load_schedule(app_spec(app)), at), app
    else:
        statuses, source = running_schedule(db, at), RUNNING_NODES
        if not statuses and filled_by_demo(db):
            from kickside_tui.demo.workload import SCHEDULE  # the demo's workers load only here

            statuses = cron_status(db, SCHEDULE, at)
            source = "the demo (kickside demo filled this database)"
    if as_json:
        output.emit_json({"source": source, "entries": statuses})
    else:
        output.table(
            None,
            (
                "key",
                "expression",
                Column("timezone", priority=5),
                Column("worker", priority=3),
                Column("queue", priority=6),
                Column("nodes", priority=7, flex=True),
                "next run (UTC)",
                Column("last run (UTC)", priority=4),
                Column("last job", priority=8),
                Column("error", priority=2, flex=True),
            ),
            [
                [
                    s.key,
                    s.expression,
                    s.timezone,
                    s.worker,
                    s.queue,
                    ", ".join(s.nodes) or "-",
                    short_time(s.next_run),
                    short_time(s.last_run),
                    s.last_job_id,
                    s.error,
                ]
                for s in statuses
            ],
        )
    if not statuses and source == RUNNING_NODES:
        output.note(
            "no running node publishes a cron entry: `kickside worker --app MODULE` runs the "
            "module's SCHEDULE (or --schedule MODULE:ATTRIBUTE); --app MODULE reads one here"
        )
    elif not statuses:
        output.note(f"{source} schedules nothing")
    elif source != RUNNING_NODES:
        output.note(f"schedule: {source}")
