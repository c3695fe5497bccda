"""The job detail pane: identity, why it is not running, args, meta, tags and retry history."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import ClassVar

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import Static

from kickside_engine import Job, JobState, Run
from kickside_engine.control import (
    Explanation,
    declared_sensitive_keys,
    purge_request,
    redact_args,
    redact_meta,
    shown_progress,
)
from kickside_tui.adapter import JobDetailData
from kickside_tui.widgets.format import (
    clock,
    first_line,
    millis,
    outcome_text,
    pretty_json,
    relative,
    stamp,
    state_text,
)
from kickside_tui.widgets.job_log import log_records, render_log
from kickside_tui.widgets.workflow_tree import workflow_tree


def _heading(title: str) -> Text:
    return Text(f"\n{title}", style="bold underline")


def _facts(job: Job, now: datetime) -> Text:
    text = Text()
    text.append(str(job.id), style="bold")
    text.append("\nstate ")
    text.append_text(state_text(job.state))
    text.append(f"  {job.kind.value}  queue {job.queue}  worker {job.worker}")
    text.append(f"\nattempt {job.attempt} of {job.max_attempts}  priority {job.priority}")
    if job.rescue_count:
        text.append(f"  rescued {job.rescue_count}x", style="dark_orange")
    if (progress := shown_progress(job)) is not None:
        # The live attempt's, or the last one it reported once it ended.
        text.append("\nprogress ")
        text.append(progress, style="bold" if job.state is JobState.EXECUTING else "")
    text.append(f"\ninserted {stamp(job.inserted_at)} ({relative(job.inserted_at, now)})")
    text.append(f"\nscheduled {stamp(job.scheduled_at)} ({relative(job.scheduled_at, now)})")
    if job.namespace is not None:
        text.append(f"\nidentity {job.namespace}/{job.scope}/{job.identity_key}")
    if job.concurrency_key or job.capacity_group:
        text.append(
            f"\nconcurrency key {job.concurrency_key or '-'}"
            f"  capacity group {job.capacity_group or '-'}"
        )
    if job.is_slot:
        text.append(
            f"\ndemand pending {'yes' if job.demand_pending else 'no'}"
            f"  control wake {'yes' if job.control_pending else 'no'}"
            f"  demand seq {job.demand_seq}"
        )
        if (purge := purge_request(job.meta)) is not None:
            text.append(f"\n{purge.describe()}: the slot runs no more", style="bold red")
    if job.lease_owner and job.lease_expires_at:
        text.append(
            f"\nlease held by {job.lease_owner}, expires {relative(job.lease_expires_at, now)}"
        )
    text.append("\ntags ")
    text.append(", ".join(job.tags) if job.tags else "none", style="italic")
    return text


def _reasons(explanation: Explanation | None) -> Text:
    if explanation is None:
        return Text("  (no explanation)", style="dim")
    if not explanation.reasons:
        return Text("  nothing holds it back", style="green")
    text = Text()
    for i, reason in enumerate(explanation.reasons):
        if i:
            text.append("\n")
        text.append("  • ")
        text.append(reason.code, style="bold")
        text.append(f": {first_line(reason.message, 200)}")
    return text


def _history(runs: list[Run], sensitive_keys: tuple[str, ...]) -> RenderableType:
    """One block per attempt, narrow enough for a side pane: outcome and time on the first
    line, node and code version on the next, then the error; long lines wrap under the block.
    """
    if not runs:
        return Text("  no attempt yet", style="dim")
    table = Table(box=None, show_header=False, pad_edge=False, show_edge=False, expand=True)
    table.add_column(no_wrap=True, style="bold")
    table.add_column(ratio=1, overflow="fold")
    for run in runs:
        block = Text()
        block.append_text(outcome_text(run.outcome))  # its colour, not the whole block's
        block.append(f"  {clock(run.started_at)}")
        if run.duration_ms is not None:
            block.append(f", took {millis(run.duration_ms)}")
        block.append(f"\non {run.node}", style="dim")
        if run.code_version:
            block.append(f" · code {run.code_version}", style="dim")
        if run.error:
            block.append("\n")
            block.append(first_line(run.error, 300, sensitive_keys), style="red")
        table.add_row(f"  #{run.attempt}", block)
    return table


def render_detail(data: JobDetailData, now: datetime) -> RenderableType:
    """Everything about one job, top to bottom; args, meta and errors redacted (with the
    sensitive key names the job's meta records)."""
    job = data.detail.job
    declared = declared_sensitive_keys(job.meta)
    parts: list[RenderableType] = [
        _facts(job, now),
        _heading("Why not running"),
        _reasons(data.explanation),
    ]
    if data.workflow is not None:
        parts += [_heading("Workflow"), workflow_tree(data.workflow, current=job.id)]
    parts += [
        _heading("Retry history"),
        _history(data.detail.runs, declared),
        _heading("Log (live)"),
        render_log(log_records(job, data.detail.runs, data.audit, sensitive_keys=declared)),
        Text(
            "from the stored runs and operator actions; a job's own output stays in its pool's log",
            style="dim italic",
        ),
    ]
    if job.errors:
        errors = Text()
        for i, error in enumerate(job.errors):
            errors.append(("\n" if i else "") + f"  #{error.attempt} {clock(error.at)} ")
            errors.append(first_line(error.error, 200, declared), style="red")
        parts += [_heading("Errors"), errors]
    parts += [
        _heading("Args"),
        Text(pretty_json(redact_args(job.args, job.meta))),
        _heading("Meta"),
        Text(pretty_json(redact_meta(job.meta))),
    ]
    if job.result is not None:
        parts += [_heading("Result"), _result(job)]
    return Group(*parts)


#: How much of a result the pane shows (a result may be up to 1 MiB of JSON).
RESULT_SHOWN_CHARS = 20_000


def _result(job: Job) -> Text:
    """The job's result, redacted as its args are; a long one cut, saying where to see all."""
    shown = pretty_json(redact_args(job.result, job.meta))
    if len(shown) <= RESULT_SHOWN_CHARS:
        return Text(shown)
    text = Text(shown[:RESULT_SHOWN_CHARS])
    text.append(
        f"\n… {len(shown) - RESULT_SHOWN_CHARS} more characters: kickside job {job.id} --json",
        style="dim italic",
    )
    return text


class JobDetailPane(VerticalScroll):
    """A scrollable pane showing one job (or a hint when none is selected)."""

    ALLOW_MAXIMIZE = True
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("j", "scroll_down", "Scroll down", show=False),
        Binding("k", "scroll_up", "Scroll up", show=False),
        Binding("y", "copy_id", "Copy the job id", show=False),
    ]

    DEFAULT_CSS = """
    JobDetailPane {
        border: round $primary 50%;
        border-title-color: $text-accent;
        padding: 0 1;
    }
    """

    def compose(self) -> ComposeResult:
        yield Static("select a job", id="detail-body")

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        #: The job shown (None while there is none).
        self.job_id: uuid.UUID | None = None

    def on_mount(self) -> None:
        self.border_title = "job"

    def action_copy_id(self) -> None:
        if self.job_id is None:
            self.notify("no job to copy", severity="warning")
            return
        self.app.copy_to_clipboard(str(self.job_id))
        self.notify(f"copied job id {self.job_id}", title="clipboard")

    def show_job(self, data: JobDetailData | None, now: datetime, *, note: str = "") -> None:
        """Show ``data``, or ``note`` when there is no job to show."""
        body = self.query_one("#detail-body", Static)
        if data is None:
            body.update(Text(note or "select a job", style="dim"))
            self.border_title = "job"
            self.job_id = None
            return
        self.job_id = data.detail.job.id
        body.update(render_detail(data, now))
        self.border_title = f"job {data.detail.job.worker} · {data.detail.job.state.value}"
