"""`kickside slots`: slot jobs by identity, with their demand and their last run."""

from __future__ import annotations

from typing import Annotated

import typer

from kickside_engine.control import list_slots
from kickside_tui.cli import output
from kickside_tui.cli.context import handles_errors, now, open_database
from kickside_tui.cli.documents import short_time
from kickside_tui.cli.options import JsonOption
from kickside_tui.cli.output import Column


@handles_errors
def slots(
    ctx: typer.Context,
    namespace: Annotated[
        str | None, typer.Option("--namespace", help="Only this namespace.")
    ] = None,
    scope: Annotated[str | None, typer.Option("--scope", help="Only this scope.")] = None,
    limit: Annotated[int, typer.Option("--limit", help="At most this many (1..10000).")] = 200,
    as_json: JsonOption = False,
) -> None:
    """List slots ordered by identity: state, pending demand, when due, and the last run.

    A slot being purged shows ``purging`` beside its state, and a note says since when.
    """
    infos = list_slots(open_database(ctx), namespace=namespace, scope=scope, limit=limit, now=now())
    if as_json:
        output.emit_json({"slots": infos})
        return
    output.table(
        None,
        (
            "namespace",
            "scope",
            "key",
            "state",
            Column("demand", priority=4),
            Column("control", priority=5),
            Column("due", priority=3),
            Column("next due (UTC)", priority=6),
            Column("last run (UTC)", priority=7),
            Column("outcome", priority=2),
            Column("job id", priority=1),
        ),
        [
            [
                s.namespace,
                s.scope,
                s.key,
                f"{s.state.value}, purging" if s.purge else s.state.value,
                s.demand_pending,
                s.control_pending,
                s.due,
                short_time(s.next_due_at),
                short_time(s.last_started_at),
                s.last_outcome.value if s.last_outcome else "",
                s.job_id,
            ]
            for s in infos
        ],
    )
    if not infos:
        output.note("no slots")
    for s in infos:
        if s.purge:
            output.note(
                f"slot {s.namespace}/{s.scope}/{s.key}: {s.purge.describe()} "
                "(it runs no more; purge-slot --until-done finishes it)"
            )
