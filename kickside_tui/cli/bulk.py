"""`kickside bulk retry|cancel|discard`: act on the jobs a filter selects, in batches.

The filter is the one of `kickside jobs` (--state, --queue, --worker, --tag, --search). An empty
filter is refused unless --all says so, and a retry never touches completed jobs (it would run
them a second time) unless --include-completed says so. --dry-run prints how many jobs the
action would change and a sample of them. Otherwise, after confirmation (or --yes), the action
runs in batches of --batch jobs, each its own audited transaction, with a progress bar on
stderr: on exactly the jobs counted in the confirmation (a job that arrived since is never
touched; one that moved on meanwhile is left alone and counted). Above
:data:`~kickside_engine.control.bulk.CONFIRM_BY_COUNT_ABOVE` jobs, and always under --all, the
confirmation asks for the count to be typed.
"""

from __future__ import annotations

from typing import Annotated

import typer

from kickside_engine import InvalidArgumentError
from kickside_engine.control import MAX_BATCH, BulkPreview, bulk_apply, bulk_preview
from kickside_tui.cli import output
from kickside_tui.cli.confirm import confirm_count, confirm_or_refuse
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
BatchOption = Annotated[int, typer.Option("--batch", help="Jobs per transaction (1..5000).")]
AllOption = Annotated[
    bool, typer.Option("--all", help="Allow an empty filter: act on every eligible job.")
]
IncludeCompletedOption = Annotated[
    bool,
    typer.Option(
        "--include-completed",
        help="Retry completed jobs too (they run a second time). Off by default.",
    ),
]
SampleOption = Annotated[int, typer.Option("--sample", help="Jobs shown by --dry-run.")]


def _excluded_note(preview: BulkPreview) -> str:
    if not preview.completed_excluded:
        return ""
    return (
        f" ({preview.completed_excluded} completed jobs left out: --include-completed "
        "retries them, running them again)"
    )


def _confirm(preview: BulkPreview, yes: bool) -> None:
    """Ask before acting; a large or unfiltered set needs its count typed in."""
    if yes:
        return
    if not preview.needs_typed_count:
        confirm_or_refuse(
            f"{preview.action.capitalize()} {preview.count} jobs?{_excluded_note(preview)}"
        )
        return
    scope = "EVERY job (no filter)" if preview.all_jobs else f"{preview.count} jobs"
    confirm_count(f"{preview.action.capitalize()} {scope}{_excluded_note(preview)}?", preview.count)


def _run(
    ctx: typer.Context,
    action: str,
    state: list[str] | None,
    queue: list[str] | None,
    worker: list[str] | None,
    tag: list[str] | None,
    search: str | None,
    every: bool,
    include_completed: bool,
    dry_run: bool,
    batch: int,
    sample: int,
    yes: bool,
    as_json: bool,
) -> None:
    flt = job_filter(state, queue, worker, tag, search)
    if not flt.as_dict() and not every:
        raise InvalidArgumentError(
            f"bulk {action} needs a filter (--state, --queue, --worker, --tag, --search) or --all"
        )
    if action == "retry" and "completed" in {s.value for s in flt.states} and not include_completed:
        raise InvalidArgumentError(
            "bulk retry --state completed runs completed jobs a second time: add "
            "--include-completed to mean it"
        )
    if not 1 <= batch <= MAX_BATCH:
        raise InvalidArgumentError(f"--batch must be 1..{MAX_BATCH}, got {batch}")
    db = open_database(ctx)
    preview = bulk_preview(
        db,
        action,
        flt,
        all_jobs=every,
        include_completed=include_completed,
        sample=sample,
        now=now(),
    )
    if dry_run:
        if as_json:
            output.emit_json(
                {
                    "action": action,
                    "filter": flt.as_dict(),
                    "dry_run": True,
                    "include_completed": include_completed,
                    "count": preview.count,
                    "completed_excluded": preview.completed_excluded,
                    "sample": [job_document(j) for j in preview.sample],
                }
            )
            return
        output.table(
            f"{action} would change {preview.count} jobs; newest:",
            JOB_COLUMNS,
            job_rows(preview.sample),
        )
        if preview.completed_excluded:
            output.note(_excluded_note(preview).strip(" ()"))
        return
    result_doc = {
        "action": action,
        "filter": flt.as_dict(),
        "include_completed": include_completed,
        "matched": 0,
        "changed": 0,
        "moved_on": 0,
    }
    if preview.count:
        _confirm(preview, yes)
        with output.progress(f"bulk {action}", total=preview.count) as tracker:
            result = bulk_apply(
                db,
                preview,
                actor(),
                now(),
                batch=batch,
                on_progress=lambda done, total: tracker.update(completed=done, total=total),
            )
        result_doc.update(matched=result.matched, changed=result.changed, moved_on=result.moved_on)
    if as_json:
        output.emit_json(result_doc)
        return
    text = f"bulk {action}: {result_doc['changed']} changed"
    if result_doc["moved_on"]:
        text += f", {result_doc['moved_on']} had moved on"
    output.plain(text + _excluded_note(preview))


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
        include_completed: IncludeCompletedOption = False,
        dry_run: DryRunOption = False,
        batch: BatchOption = 500,
        sample: SampleOption = 10,
        yes: YesOption = False,
        as_json: JsonOption = False,
    ) -> None:
        _run(
            ctx,
            action,
            state,
            queue,
            worker,
            tag,
            search,
            every,
            include_completed,
            dry_run,
            batch,
            sample,
            yes,
            as_json,
        )


_command(
    "retry",
    "Make every selected retryable, scheduled, parked, cancelled or discarded "
    "job available (completed ones only with --include-completed).",
)
_command("cancel", "Cancel every selected job that is not final (executing ones are aborted).")
_command("discard", "Discard every selected job that is not final.")
