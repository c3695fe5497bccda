"""The job detail pane: identity, why it is not running, args, meta, tags and retry history."""

from __future__ import annotations

from datetime import datetime

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from kickside_engine import Job, Run
from kickside_engine.explain import Explanation
from kickside_engine.purge import purge_request
from kickside_engine.redact import declared_sensitive_keys, redact_args, redact_meta
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
    text.append(f"\ninserted {stamp(job.inserted_at)} ({relative(job.inserted_at, now)})")
    text.append(f"\nscheduled {stamp(job.scheduled_at)} ({relative(job.scheduled_at, now)})")
    if job.namespace is not None:
        text.append(f"\nidentity {job.namespace}/{job.scope}/{job.identity_key}")
    if job.concurrency_key or job.capacity_group:
        text.append(f"\nconcurrency key {job.concurrency_key or '-'}"
                    f"  capacity group {job.capacity_group or '-'}")
    if job.is_slot:
        text.append(f"\ndemand pending {'yes' if job.demand_pending else 'no'}"
                    f"  control wake {'yes' if job.control_pending else 'no'}"
                    f"  demand seq {job.demand_seq}")
        if (purge := purge_request(job.meta)) is not None:
            text.append(f"\n{purge.describe()}: the slot runs no more", style="bold red")
    if job.lease_owner and job.lease_expires_at:
        text.append(f"\nlease held by {job.lease_owner}, expires "
                    f"{relative(job.lease_expires_at, now)}")
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
    if not runs:
        return Text("  no attempt yet", style="dim")
    table = Table(box=None, pad_edge=False, show_edge=False, expand=False, header_style="bold")
    for column in ("#", "started", "node", "took", "outcome", "code", "error"):
        table.add_column(column, no_wrap=column != "error")
    for run in runs:
        table.add_row(
            str(run.attempt),
            clock(run.started_at),
            run.node,
            millis(run.duration_ms),
            outcome_text(run.outcome),
            run.code_version or "-",
            first_line(run.error, 120, sensitive_keys),
        )
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
        _heading("Retry history"),
        _history(data.detail.runs, declared),
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
    return Group(*parts)


class JobDetailPane(VerticalScroll):
    """A scrollable pane showing one job (or a hint when none is selected)."""

    ALLOW_MAXIMIZE = True

    DEFAULT_CSS = """
    JobDetailPane {
        border: round $primary 50%;
        border-title-color: $text-accent;
        padding: 0 1;
    }
    """

    def compose(self) -> ComposeResult:
        yield Static("select a job", id="detail-body")

    def on_mount(self) -> None:
        self.border_title = "job"

    def show_job(self, data: JobDetailData | None, now: datetime, *, note: str = "") -> None:
        """Show ``data``, or ``note`` when there is no job to show."""
        body = self.query_one("#detail-body", Static)
        if data is None:
            body.update(Text(note or "select a job", style="dim"))
            self.border_title = "job"
            return
        body.update(render_detail(data, now))
        self.border_title = f"job {data.detail.job.worker} · {data.detail.job.state.value}"
