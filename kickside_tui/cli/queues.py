"""`kickside queues`: queues with their job counts and nodes; pause and resume them."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from kickside_engine import JobState, NotFoundError
from kickside_engine.control import (
    QueueInfo,
    find_queue,
    list_queues,
    pause_queue,
    resume_queue,
)
from kickside_tui.cli import output
from kickside_tui.cli.confirm import unless_yes
from kickside_tui.cli.context import actor, handles_errors, now, open_database, writes
from kickside_tui.cli.documents import utc_time
from kickside_tui.cli.options import JsonOption, YesOption
from kickside_tui.cli.output import Column

app = typer.Typer(help="List queues; pause or resume one on every node.")

QueueArgument = Annotated[str, typer.Argument(metavar="QUEUE", help="The queue's name.")]
_COUNTED = (JobState.AVAILABLE, JobState.SCHEDULED, JobState.EXECUTING, JobState.RETRYABLE)


def queue_document(info: QueueInfo) -> dict[str, Any]:
    """A queue as ``--json`` prints it (counts by state, live nodes, total concurrency)."""
    return {
        "name": info.name,
        "paused": info.paused,
        "paused_at": info.paused_at,
        "paused_by": info.paused_by,
        "counts": {state.value: count for state, count in info.counts.items()},
        "nodes": info.nodes,
        "concurrency": info.concurrency,
        "no_node": info.no_node,
    }


@app.callback(invoke_without_command=True)
@handles_errors
def queues(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """List queues: paused flag, jobs by state, live nodes and their concurrency."""
    if ctx.invoked_subcommand is not None:
        return
    infos = list_queues(open_database(ctx), now())
    if as_json:
        output.emit_json({"queues": [queue_document(q) for q in infos]})
        return
    output.table(
        None,
        (
            "queue",
            Column("paused", flex=True),
            *(Column(s.value, justify="right") for s in _COUNTED),
            Column("nodes", priority=3, flex=True),
            Column("concurrency", priority=4, justify="right"),
            Column("attention", priority=1, flex=True),
        ),
        [
            [
                q.name,
                f"yes (by {q.paused_by} at {utc_time(q.paused_at)})" if q.paused else "no",
                *(q.counts[s] for s in _COUNTED),
                ", ".join(n.node for n in q.nodes),
                q.concurrency,
                "jobs waiting, no node runs this queue" if q.no_node else "",
            ]
            for q in infos
        ],
    )
    if not infos:
        output.note("no queues yet")


def _report(info: QueueInfo, as_json: bool) -> None:
    if as_json:
        output.emit_json({"queue": queue_document(info)})
    else:
        output.plain(f"queue {info.name} is {'paused' if info.paused else 'running'}")


CreateOption = Annotated[
    bool,
    typer.Option(
        "--create", help="Pause a queue that is not known yet (no jobs, no node runs it)."
    ),
]


@app.command("pause")
@handles_errors
@writes
def pause(
    ctx: typer.Context,
    name: QueueArgument,
    create: CreateOption = False,
    yes: YesOption = False,
    as_json: JsonOption = False,
) -> None:
    """Pause QUEUE on every node: no new claims, running jobs finish (idempotent).

    Asks first, saying which live nodes stop claiming its jobs (--yes for scripts). An
    unknown name is refused, listing the known queues, unless --create.
    """
    db = open_database(ctx)
    when = now()
    try:
        info: QueueInfo | None = find_queue(db, name, when)
    except NotFoundError as exc:
        if not create:
            raise NotFoundError(f"{exc}; --create pauses a new queue", exc.details) from None
        info = None
    if info is None or not info.paused:
        running = [n.node for n in info.nodes] if info is not None else []
        effect = (
            f"Live nodes {', '.join(running)} stop claiming its jobs; running jobs finish."
            if running
            else "No live node runs it now: its jobs wait until it is resumed."
        )
        unless_yes(yes, f"Pause queue {name} on every node? {effect}")
    _report(pause_queue(db, name, actor(), now(), create=create), as_json)


@app.command("resume")
@handles_errors
@writes
def resume(ctx: typer.Context, name: QueueArgument, as_json: JsonOption = False) -> None:
    """Resume QUEUE on every node and wake the pools that run it (exit 3 if it is unknown)."""
    _report(resume_queue(open_database(ctx), name, actor(), now()), as_json)
