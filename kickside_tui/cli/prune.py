"""`kickside prune`: delete final jobs older than the retention period, with their runs."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Annotated

import typer

from kickside_engine import InvalidArgumentError
from kickside_engine.control import PRUNE_BATCH as BATCH
from kickside_engine.control import PRUNE_MAX_BATCHES as MAX_BATCHES
from kickside_engine.control import prune as engine_prune
from kickside_tui.cli import output
from kickside_tui.cli.confirm import unless_yes
from kickside_tui.cli.context import (
    handles_errors,
    now,
    open_database,
    record_action,
    writes,
)
from kickside_tui.cli.options import JsonOption, YesOption

#: The oldest cut-off `prune` takes (about 270 years).
MAX_DAYS = 100_000


@handles_errors
@writes
def prune(
    ctx: typer.Context,
    older_than_days: Annotated[
        float,
        typer.Option(
            "--older-than-days", help="Delete final jobs finalized more than this many days ago."
        ),
    ] = 7.0,
    yes: YesOption = False,
    as_json: JsonOption = False,
) -> None:
    """Delete completed, cancelled and discarded jobs older than --older-than-days.

    Works in bounded batches (short transactions) until nothing that old is left. Jobs that
    are not final are never deleted.
    """
    if not math.isfinite(older_than_days) or not 0 <= older_than_days <= MAX_DAYS:
        raise InvalidArgumentError(
            f"--older-than-days must be a number of days in 0..{MAX_DAYS}, got {older_than_days}"
        )
    max_age = timedelta(days=older_than_days)
    db = open_database(ctx)
    unless_yes(yes, f"Delete final jobs older than {older_than_days:g} days, with their runs?")
    when = now()
    total = 0
    with output.progress("pruning") as tracker:
        while True:
            count = engine_prune(db, when, max_age=max_age)
            total += count
            tracker.update(completed=total, description=f"pruning: {total} jobs deleted")
            if count < BATCH * MAX_BATCHES:
                break
    record_action(
        db,
        "prune",
        "jobs",
        f"older than {older_than_days:g} days",
        {"deleted": total, "older_than_days": older_than_days},
        when,
    )
    if as_json:
        output.emit_json({"deleted": total, "older_than_days": older_than_days})
    else:
        output.plain(f"deleted {total} final jobs older than {older_than_days:g} days")
