"""`kickside leases`: executing jobs, the node holding each lease, and how long they have run."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Any

import typer

from kickside_engine import Job, JobState
from kickside_engine.control import JobFilter, list_jobs
from kickside_tui.cli import output
from kickside_tui.cli.context import handles_errors, names, now, open_database
from kickside_tui.cli.documents import seconds, short_time
from kickside_tui.cli.options import JsonOption
from kickside_tui.cli.output import Column


def lease_document(job: Job, at: datetime) -> dict[str, Any]:
    """One executing job's lease at ``at``: expiry, elapsed time and its max execution."""
    elapsed = at - job.attempted_at if job.attempted_at else None
    limit = timedelta(milliseconds=job.max_execution_ms) if job.max_execution_ms else None
    return {
        "job_id": job.id,
        "worker": job.worker,
        "queue": job.queue,
        "node": job.lease_owner,
        "attempt": job.attempt,
        "attempted_at": job.attempted_at,
        "lease_expires_at": job.lease_expires_at,
        "lease_expired": job.lease_expires_at is not None and job.lease_expires_at <= at,
        "elapsed_seconds": elapsed,
        "max_execution_seconds": limit,
        "over_max_execution": elapsed is not None and limit is not None and elapsed > limit,
    }


@handles_errors
def leases(
    ctx: typer.Context,
    queue: Annotated[
        list[str] | None,
        typer.Option("--queue", help="Only these queues (repeat, or comma-separate)."),
    ] = None,
    limit: Annotated[int, typer.Option("--limit", help="At most this many (1..1000).")] = 200,
    as_json: JsonOption = False,
) -> None:
    """List executing jobs: node, lease expiry, and elapsed time against max execution."""
    flt = JobFilter(states=(JobState.EXECUTING,), queues=names(queue))
    page = list_jobs(open_database(ctx), flt, limit=limit)
    at = now()
    docs = [lease_document(j, at) for j in page.jobs]
    if as_json:
        output.emit_json({"leases": docs, "truncated": page.next_cursor is not None})
        return
    output.table(
        None,
        (
            "job id",
            "worker",
            Column("queue", priority=3),
            "node",
            Column("lease expires (UTC)", priority=4),
            Column("elapsed", justify="right"),
            Column("max execution", priority=2, justify="right"),
            Column("attention", priority=1, flex=True),
        ),
        [
            [
                d["job_id"],
                d["worker"],
                d["queue"],
                d["node"],
                short_time(d["lease_expires_at"]),
                seconds(d["elapsed_seconds"]),
                seconds(d["max_execution_seconds"]),
                ", ".join(
                    flag
                    for flag, on in (
                        ("lease expired", d["lease_expired"]),
                        ("over max execution", d["over_max_execution"]),
                    )
                    if on
                ),
            ]
            for d in docs
        ],
    )
    if page.next_cursor is not None:
        output.note(f"showing the newest {limit} executing jobs; raise --limit to see more")
    elif not docs:
        output.note("no job is executing")
