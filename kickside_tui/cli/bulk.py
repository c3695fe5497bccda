"""`kickside bulk retry|cancel|discard`: act on every job a filter selects, in batches.

The filter is the one of `kickside jobs` (--state, --queue, --worker, --tag, --search). An empty
filter is refused unless --all says so. --dry-run prints how many jobs the action would change
and a sample of them; otherwise, after confirmation (or --yes), the action runs in batches of
--batch jobs, each its own audited transaction, with a progress bar on stderr.
"""

from __future__ import annotations

from typing import Annotated

import typer

from kickside_engine import InvalidArgumentError
from kickside_engine.bulk import MAX_BATCH
from kickside_engine.control import bulk_apply, bulk_preview
from kickside_tui.cli import output
from kickside_tui.cli.confirm import unless_yes
from kickside_tui.cli.context import actor, handles_errors, now, open_database, writes
from kickside_tui.cli.documents import job_document
from kickside_tui.cli.jobs import (
    JOB_COLUMNS,
    QueueOption,
    SearchOption,
    StateOption,
    TagOption,
    WorkerOption,
    job_filter,
    job_rows,
)
from kickside_tui.cli.options import JsonOption, YesOption

app = typer.Typer(help="Retry, cancel or discard every job a filter selects, in batches.")

DryRunOption = Annotated[
    bool, typer.Option("--dry-run", help="Print the count and a sample; change nothing.")
]
BatchOption = Annotated[
    int, typer.Option("--batch", help="Jobs per transaction (1..5000).")
]
AllOption = Annotated[
    bool, typer.Option("--all", help="Allow an empty filter: act on every eligible job.")
]
SampleOption = Annotated[int, typer.Option("--sample", help="Jobs shown by --dry-run.")]


def _run(
    ctx: typer.Context, action: str, state: list[str] | None, queue: list[str] | None,
    worker: list[str] | None, tag: list[str] | None, search: str | None, every: bool,
    dry_run: bool, batch: int, sample: int, yes: bool, as_json: bool,
) -> None:
    flt = job_filter(state, queue, worker, tag, search)
    if not flt.as_dict() and not every:
        raise InvalidArgumentError(
            f"bulk {action} needs a filter (--state, --queue, --worker, --tag, --search) "
            "or --all"
        )
    if not 1 <= batch <= MAX_BATCH:
        raise InvalidArgumentError(f"--batch must be 1..{MAX_BATCH}, got {batch}")
    db = open_database(ctx)
    preview = bulk_preview(db, action, flt, sample=sample)
    if dry_run:
        if as_json:
            output.emit_json({
                "action": action, "filter": flt.as_dict(), "dry_run": True,
                "count": preview.count, "sample": [job_document(j) for j in preview.sample],
            })
            return
        output.table(f"{action} would change {preview.count} jobs; newest:", JOB_COLUMNS,
                     job_rows(preview.sample))
        return
    if preview.count == 0:
        result_doc = {"action": action, "filter": flt.as_dict(), "matched": 0, "changed": 0,
                      "skipped": 0}
    else:
        unless_yes(yes, f"{action.capitalize()} {preview.count} jobs?")
        with output.progress(f"bulk {action}", total=preview.count) as tracker:
            result = bulk_apply(
                db, action, flt, actor(), now(), batch=batch,
                on_progress=lambda done, total: tracker.update(completed=done, total=total),
            )
        result_doc = {"action": action, "filter": flt.as_dict(), "matched": result.matched,
                      "changed": result.changed, "skipped": result.skipped}
    if as_json:
        output.emit_json(result_doc)
    else:
        output.plain(
            f"{action}: {result_doc['changed']} jobs changed, {result_doc['skipped']} skipped "
            "(changed meanwhile)"
        )


def _command(action: str, summary: str) -> None:
    @app.command(action, help=summary)
    @handles_errors
    @writes
    def command(
        ctx: typer.Context,
        state: StateOption = None,
        queue: QueueOption = None,
        worker: WorkerOption = None,
        tag: TagOption = None,
        search: SearchOption = None,
        every: AllOption = False,
        dry_run: DryRunOption = False,
        batch: BatchOption = 500,
        sample: SampleOption = 10,
        yes: YesOption = False,
        as_json: JsonOption = False,
    ) -> None:
        _run(ctx, action, state, queue, worker, tag, search, every, dry_run, batch, sample,
             yes, as_json)


_command("retry", "Make every selected retryable, scheduled, parked or finished job available.")
_command("cancel", "Cancel every selected job that is not final (executing ones are aborted).")
_command("discard", "Discard every selected job that is not final.")
