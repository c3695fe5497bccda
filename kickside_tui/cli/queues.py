"""`kickside queues`: queues with their job counts and nodes; pause and resume them."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from kickside_engine import JobState, NotFoundError
from kickside_engine.control import QueueInfo, list_queues, pause_queue, resume_queue
from kickside_tui.cli import output
from kickside_tui.cli.context import actor, handles_errors, now, open_database, writes
from kickside_tui.cli.documents import short_time
from kickside_tui.cli.options import JsonOption

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
        ("queue", "paused", *(s.value for s in _COUNTED), "nodes", "concurrency", "attention"),
        [
            [
                q.name,
                f"yes (by {q.paused_by} at {short_time(q.paused_at)})" if q.paused else "no",
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


@app.command("pause")
@handles_errors
@writes
def pause(ctx: typer.Context, name: QueueArgument, as_json: JsonOption = False) -> None:
    """Pause QUEUE on every node: no new claims, running jobs finish (idempotent)."""
    _report(pause_queue(open_database(ctx), name, actor(), now()), as_json)


@app.command("resume")
@handles_errors
@writes
def resume(ctx: typer.Context, name: QueueArgument, as_json: JsonOption = False) -> None:
    """Resume QUEUE on every node and wake the pools that run it (exit 3 if it never existed)."""
    db = open_database(ctx)
    when = now()
    if name not in {q.name for q in list_queues(db, when)}:
        raise NotFoundError(f"queue {name!r} not found: it has no jobs and was never paused")
    _report(resume_queue(db, name, actor(), when), as_json)
