"""`kickside stats`: the overview: jobs by queue and state, nodes, throughput, stuck work."""

from __future__ import annotations

import typer

from kickside_engine import JobState
from kickside_engine.control import Overview, overview
from kickside_tui.cli import output
from kickside_tui.cli.context import handles_errors, now, open_database
from kickside_tui.cli.options import JsonOption
from kickside_tui.cli.output import Column

_STATES = tuple(JobState)
#: The states whose column gives way first at 80 columns.
_GIVE_WAY = {
    JobState.CANCELLED: 2,
    JobState.PARKED: 3,
    JobState.DISABLED: 4,
    JobState.WAITING: 4,
}


def overview_document(view: Overview) -> dict[str, object]:
    """The overview as ``--json`` prints it: state keys as their values."""
    return {
        "at": view.at,
        "totals": {s.value: n for s, n in view.totals.items()},
        "queues": {q: {s.value: n for s, n in c.items()} for q, c in view.counts.items()},
        "nodes_alive": view.nodes_alive,
        "nodes_stale": view.nodes_stale,
        "completed_last_minute": view.completed_last_minute,
        "failed_last_minute": view.failed_last_minute,
        "expired_leases": view.expired_leases,
        "queues_without_node": view.queues_without_node,
        "paused_queues": view.paused_queues,
    }


@handles_errors
def stats(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """Show jobs per queue and state, live and stale nodes, and the last minute's runs."""
    view = overview(open_database(ctx), now())
    if as_json:
        output.emit_json(overview_document(view))
        return
    rows = [[q, *(c[s] for s in _STATES)] for q, c in sorted(view.counts.items())]
    rows.append(["(all)", *(view.totals[s] for s in _STATES)])
    output.table(
        "jobs",
        (
            "queue",
            *(Column(s.value, priority=_GIVE_WAY.get(s, 0), justify="right") for s in _STATES),
        ),
        rows,
    )
    output.fields(
        None,
        [
            ("nodes", f"{view.nodes_alive} alive, {view.nodes_stale} stale"),
            (
                "last minute",
                f"{view.completed_last_minute} completed, {view.failed_last_minute} failed",
            ),
            ("expired leases", view.expired_leases),
            ("paused queues", ", ".join(view.paused_queues) or "none"),
            ("queues without a node", ", ".join(view.queues_without_node) or "none"),
        ],
    )
