"""`kickside jobs` (filtered, paged listing) and `kickside job ID` (one job with its history)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from kickside_engine import Job
from kickside_engine.control import (
    JobFilter,
    declared_sensitive_keys,
    job_detail,
    list_jobs,
    purge_request,
    shown_progress,
)
from kickside_tui.cli import output
from kickside_tui.cli.context import handles_errors, job_id, names, open_database
from kickside_tui.cli.documents import (
    job_document,
    run_document,
    seconds,
    short_time,
    utc_time,
)
from kickside_tui.cli.options import JobIdArgument, JsonOption
from kickside_tui.cli.output import Column
from kickside_tui.widgets.format import first_line

StateOption = Annotated[
    list[str] | None,
    typer.Option(
        "--state",
        help="Only jobs in these states: repeat it, or comma-separate (retryable,discarded).",
    ),
]
QueueOption = Annotated[
    list[str] | None,
    typer.Option("--queue", help="Only jobs in these queues (repeat, or comma-separate)."),
]
WorkerOption = Annotated[
    list[str] | None,
    typer.Option("--worker", help="Only jobs of these workers (repeat, or comma-separate)."),
]
TagOption = Annotated[
    list[str] | None,
    typer.Option(
        "--tag",
        help="Only jobs with this tag; repeat it for several (each must be "
        "present). A comma is part of the tag.",
    ),
]
SearchOption = Annotated[
    str | None, typer.Option("--search", help="Text in the args or an error message.")
]
KindOption = Annotated[
    list[str] | None,
    typer.Option("--kind", help="Only oneshot or slot jobs (repeat, or comma-separate)."),
]


def job_filter(
    states: list[str] | None,
    queues: list[str] | None,
    workers: list[str] | None,
    tags: list[str] | None,
    search: str | None = None,
    kinds: list[str] | None = None,
) -> JobFilter:
    """The engine filter for the command line's options (validated by the engine: exit 2).

    States, queues, workers and kinds may be comma-separated lists (none of them can hold a
    comma); tags are taken whole, since a tag may.
    """
    return JobFilter(
        states=names(states),  # type: ignore[arg-type]
        queues=names(queues),
        workers=names(workers),
        tags=tuple(tags or ()),
        kinds=names(kinds),  # type: ignore[arg-type]
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
            first_line(j.errors[-1].error, 200, declared_sensitive_keys(j.meta))
            if j.errors
            else "",
        ]
        for j in jobs
    ]


#: The listing's columns; at 80 columns tags, attempts and times give way first.
JOB_COLUMNS = (
    Column("id"),
    Column("state"),
    Column("queue", priority=3),
    Column("worker"),
    Column("attempt", priority=5),
    Column("tags", priority=6),
    Column("scheduled at (UTC)", priority=4),
    Column("last error", priority=2, flex=True),
)


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
def job(ctx: typer.Context, ident: JobIdArgument, as_json: JsonOption = False) -> None:
    """Show one job: its fields, progress, args, meta and result (redacted), errors and runs."""
    detail = job_detail(open_database(ctx), job_id(ctx, ident))
    document = job_document(detail.job)
    declared = declared_sensitive_keys(detail.job.meta)
    runs = [run_document(r, declared) for r in detail.runs]
    purge = purge_request(detail.job.meta) if detail.job.is_slot else None
    if as_json:
        output.emit_json({"job": document, "runs": runs, "purge": purge})
        return
    j = detail.job
    pairs: list[tuple[str, object]] = [
        ("id", j.id),
        ("kind", j.kind.value),
        ("state", j.state.value),
        ("queue", j.queue),
        ("worker", j.worker),
        ("attempt", f"{j.attempt}/{j.max_attempts}"),
        ("progress", shown_progress(j)),
        ("priority", j.priority),
        ("tags", ", ".join(j.tags)),
    ]
    if j.is_slot or j.namespace:
        pairs += [
            ("identity", f"{j.namespace}/{j.scope}/{j.identity_key}"),
            (
                "demand",
                f"pending={j.demand_pending} control={j.control_pending} seq={j.demand_seq}",
            ),
            ("purge", f"{purge.describe()}: the slot runs no more" if purge else None),
        ]
    pairs += [
        ("concurrency key", j.concurrency_key),
        ("capacity group", j.capacity_group),
        (
            "lease",
            f"{j.lease_owner} until {utc_time(j.lease_expires_at)}"
            if j.lease_owner and j.lease_expires_at
            else None,
        ),
        ("max execution", seconds(j.max_execution_ms / 1000) if j.max_execution_ms else None),
        ("inserted at", utc_time(j.inserted_at)),
        ("scheduled at", utc_time(j.scheduled_at)),
        ("attempted at", utc_time(j.attempted_at)),
        ("finalized at", utc_time(j.finalized_at)),
        ("args", json.dumps(document["args"], ensure_ascii=False)),
        ("meta", json.dumps(document["meta"], ensure_ascii=False)),
        (
            "result",
            json.dumps(document["result"], ensure_ascii=False)
            if document["result"] is not None
            else None,
        ),
    ]
    output.fields(f"job {j.id}", [(k, v) for k, v in pairs if v not in (None, "")])
    if document["errors"]:
        output.table(
            "errors",
            ("attempt", "at (UTC)", "error"),
            [
                [e.attempt, short_time(e.at), shown["error"]]
                for e, shown in zip(j.errors, document["errors"], strict=True)
            ],
        )
    output.table(
        "runs",
        (
            Column("#", justify="right"),
            Column("attempt", priority=2),
            "node",
            "started (UTC)",
            Column("finished (UTC)", priority=3),
            "took",
            "outcome",
            Column("error", priority=1, flex=True),
        ),
        [
            [
                i,
                r.attempt,
                r.node,
                short_time(r.started_at),
                short_time(r.finished_at),
                seconds(r.duration_ms / 1000) if r.duration_ms is not None else "",
                r.outcome.value if r.outcome else "running",
                first_line(r.error, 500, declared),
            ]
            for i, r in enumerate(detail.runs, 1)
        ],
    )
