"""`kickside jobs` (filtered, paged listing) and `kickside job ID` (one job with its history)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from kickside_engine import Job
from kickside_engine.control import JobFilter, job_detail, list_jobs
from kickside_engine.purge import purge_request
from kickside_engine.redact import declared_sensitive_keys
from kickside_tui.cli import output
from kickside_tui.cli.context import handles_errors, open_database
from kickside_tui.cli.documents import (
    first_line,
    job_document,
    run_document,
    seconds,
    short_time,
)
from kickside_tui.cli.options import JobIdArgument, JsonOption

StateOption = Annotated[
    list[str] | None,
    typer.Option("--state", help="Only jobs in this state (repeatable)."),
]
QueueOption = Annotated[list[str] | None, typer.Option("--queue", help="Queue (repeatable).")]
WorkerOption = Annotated[list[str] | None, typer.Option("--worker", help="Worker (repeatable).")]
TagOption = Annotated[
    list[str] | None, typer.Option("--tag", help="Tag; every tag given must be present.")
]
SearchOption = Annotated[
    str | None, typer.Option("--search", help="Text in the args or an error message.")
]
KindOption = Annotated[
    list[str] | None, typer.Option("--kind", help="oneshot or slot (repeatable).")
]


def job_filter(
    states: list[str] | None,
    queues: list[str] | None,
    workers: list[str] | None,
    tags: list[str] | None,
    search: str | None = None,
    kinds: list[str] | None = None,
) -> JobFilter:
    """The engine filter for the command line's options (validated by the engine: exit 2)."""
    return JobFilter(
        states=tuple(states or ()),  # type: ignore[arg-type]
        queues=tuple(queues or ()),
        workers=tuple(workers or ()),
        tags=tuple(tags or ()),
        kinds=tuple(kinds or ()),  # type: ignore[arg-type]
        search=search,
    )


def job_rows(jobs: list[Job]) -> list[list[object]]:
    """The listing's table rows."""
    return [
        [
            j.id,
            j.state.value,
            j.queue,
            j.worker,
            f"{j.attempt}/{j.max_attempts}",
            ", ".join(j.tags),
            short_time(j.scheduled_at),
            first_line(j.errors[-1].error, 60, declared_sensitive_keys(j.meta))
            if j.errors else "",
        ]
        for j in jobs
    ]


JOB_COLUMNS = ("id", "state", "queue", "worker", "attempt", "tags", "scheduled at", "last error")


@handles_errors
def jobs(
    ctx: typer.Context,
    state: StateOption = None,
    queue: QueueOption = None,
    worker: WorkerOption = None,
    tag: TagOption = None,
    search: SearchOption = None,
    kind: KindOption = None,
    limit: Annotated[int, typer.Option("--limit", help="Jobs per page (1..1000).")] = 50,
    cursor: Annotated[
        str | None, typer.Option("--cursor", help="Continue after a previous page.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """List jobs, newest first, with filters; prints the cursor of the next page."""
    flt = job_filter(state, queue, worker, tag, search, kind)
    page = list_jobs(open_database(ctx), flt, limit=limit, cursor=cursor)
    if as_json:
        output.emit_json(
            {"jobs": [job_document(j) for j in page.jobs], "next_cursor": page.next_cursor}
        )
        return
    output.table(None, JOB_COLUMNS, job_rows(page.jobs))
    if page.next_cursor:
        output.info(f"next page: --cursor {page.next_cursor}")
    elif not page.jobs:
        output.note("no jobs match")


@handles_errors
def job(ctx: typer.Context, job_id: JobIdArgument, as_json: JsonOption = False) -> None:
    """Show one job: its fields, args and meta (redacted), errors and runs."""
    detail = job_detail(open_database(ctx), job_id)
    document = job_document(detail.job)
    declared = declared_sensitive_keys(detail.job.meta)
    runs = [run_document(r, declared) for r in detail.runs]
    purge = purge_request(detail.job.meta) if detail.job.is_slot else None
    if as_json:
        output.emit_json({"job": document, "runs": runs, "purge": purge})
        return
    j = detail.job
    pairs: list[tuple[str, object]] = [
        ("id", j.id), ("kind", j.kind.value), ("state", j.state.value), ("queue", j.queue),
        ("worker", j.worker), ("attempt", f"{j.attempt}/{j.max_attempts}"),
        ("priority", j.priority), ("tags", ", ".join(j.tags)),
    ]
    if j.is_slot or j.namespace:
        pairs += [
            ("identity", f"{j.namespace}/{j.scope}/{j.identity_key}"),
            ("demand", f"pending={j.demand_pending} control={j.control_pending} "
                       f"seq={j.demand_seq}"),
            ("purge", f"{purge.describe()}: the slot runs no more" if purge else None),
        ]
    pairs += [
        ("concurrency key", j.concurrency_key), ("capacity group", j.capacity_group),
        ("lease", f"{j.lease_owner} until {short_time(j.lease_expires_at)}"
         if j.lease_owner and j.lease_expires_at else None),
        ("max execution", seconds(j.max_execution_ms / 1000) if j.max_execution_ms else None),
        ("inserted at", short_time(j.inserted_at)), ("scheduled at", short_time(j.scheduled_at)),
        ("attempted at", short_time(j.attempted_at)), ("finalized at", short_time(j.finalized_at)),
        ("args", json.dumps(document["args"], ensure_ascii=False)),
        ("meta", json.dumps(document["meta"], ensure_ascii=False)),
    ]
    output.fields(f"job {j.id}", [(k, v) for k, v in pairs if v not in (None, "")])
    if document["errors"]:
        output.table(
            "errors", ("attempt", "at", "error"),
            [[e["attempt"], e["at"], e["error"]] for e in document["errors"]],
        )
    output.table(
        "runs", ("#", "attempt", "node", "started", "finished", "took", "outcome", "error"),
        [
            [
                i, r.attempt, r.node, short_time(r.started_at), short_time(r.finished_at),
                seconds(r.duration_ms / 1000) if r.duration_ms is not None else "",
                r.outcome.value if r.outcome else "running",
                first_line(r.error, 80, declared),
            ]
            for i, r in enumerate(detail.runs, 1)
        ],
    )
