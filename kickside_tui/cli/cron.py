"""`kickside cron --app MODULE`: the application's schedule, next and last runs.

Without ``--app`` it shows the demo's schedule over a database that ``kickside demo`` filled
(as the dashboard does), and otherwise says to pass ``--app``.

The schedule lives in code, not in the database: the command imports ``MODULE`` (from the
current directory, like ``kickside worker``) and reads its ``SCHEDULE``, a sequence of
:class:`kickside_engine.plugins.cron.Recurring` (``module:attribute`` names another attribute).
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence
from typing import Annotated

import typer

from kickside_engine import ConfigurationError, InvalidArgumentError
from kickside_engine.plugins.cron import Recurring, cron_status
from kickside_tui.cli import output
from kickside_tui.cli.context import app_spec, handles_errors, now, open_database
from kickside_tui.cli.documents import short_time
from kickside_tui.cli.options import JsonOption
from kickside_tui.demo.marker import filled_by_demo


def load_schedule(app: str) -> list[Recurring]:
    """Import ``module`` or ``module:attribute`` and return its schedule (``SCHEDULE``)."""
    module_name, _, attr = app_spec(app).partition(":")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # like `python -m`: the app module is found from here
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigurationError(f"cannot import schedule module {module_name!r}: {exc}") from None
    name = attr or "SCHEDULE"
    entries = getattr(module, name, None)
    if isinstance(entries, str) or not isinstance(entries, Sequence):
        raise ConfigurationError(f"{module_name}:{name} is not a sequence of Recurring entries")
    for index, entry in enumerate(entries):
        if not isinstance(entry, Recurring):
            raise InvalidArgumentError(
                f"{module_name}:{name} entry {index} is not a Recurring: {type(entry).__name__}"
            )
    return list(entries)


@handles_errors
def cron(
    ctx: typer.Context,
    app: Annotated[
        str | None,
        typer.Option(
            "--app",
            help="Module with SCHEDULE, a sequence of Recurring (module or module:attribute). "
            "Without it: the demo's schedule over a database `kickside demo` filled.",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Show each cron entry: expression, next run, last run and the job it enqueued."""
    db = open_database(ctx)
    if app is not None:
        entries, source = load_schedule(app), app
    elif filled_by_demo(db):
        from kickside_tui.demo.workload import SCHEDULE  # the demo's workers load only here

        entries, source = list(SCHEDULE), "the demo (kickside demo filled this database)"
    else:
        raise ConfigurationError(
            "no schedule to show: pass --app MODULE (a schedule lives in the application's "
            "code; the database records only the runs that fired)"
        )
    statuses = cron_status(db, entries, now())
    if as_json:
        output.emit_json({"source": source, "entries": statuses})
        return
    output.table(
        None,
        ("key", "expression", "next run", "last run", "last job", "error"),
        [
            [s.key, s.expression, short_time(s.next_run), short_time(s.last_run),
             s.last_job_id, s.error]
            for s in statuses
        ],
    )
    if not statuses:
        output.note(f"{source} schedules nothing")
    elif app is None:
        output.note(f"schedule: {source}")
