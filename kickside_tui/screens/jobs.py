"""Jobs: a filterable, keyset-paged table with a detail pane and single and bulk actions."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal
from textual.message import Message
from textual.widgets import DataTable, Input, Static

from kickside_engine import InvalidArgumentError, Job
from kickside_engine.control import BulkPreview, JobFilter
from kickside_tui.adapter import JobDetailData, JobsData
from kickside_tui.screens.base import ActionFinished, ViewScreen, describe_failure
from kickside_tui.screens.confirm import ConfirmScreen
from kickside_tui.widgets.format import (
    count,
    first_line,
    relative,
    short_id,
    state_text,
)
from kickside_tui.widgets.job_detail import JobDetailPane
from kickside_tui.widgets.tables import Row, refill, selected_key

PAGE_SIZE = 50
#: Counting every match costs a scan on big tables: recount on filter changes and now and then.
RECOUNT_EVERY = 10
FILTER_FIELDS = ("state", "queue", "worker", "tag", "search")
_SPLIT = re.compile(r"[,\s]+")


def parse_filter(values: dict[str, str]) -> JobFilter:
    """The filter the inputs describe: comma-separated states/queues/workers/tags, free text.

    Raises :class:`InvalidArgumentError` naming a bad value (an unknown state, say).
    """

    def names(field: str) -> tuple[str, ...]:
        return tuple(p for p in _SPLIT.split(values.get(field, "").strip()) if p)

    search = values.get("search", "").strip()
    states: Any = tuple(s.lower() for s in names("state"))  # JobFilter validates the names
    return JobFilter(
        states=states,
        queues=names("queue"),
        workers=names("worker"),
        tags=names("tag"),
        search=search or None,
    )


def describe_filter(flt: JobFilter) -> str:
    """The filter as ``state=retryable queue=mailers`` (``every job`` when empty)."""
    parts = [f"{k}={','.join(v) if isinstance(v, list) else v}" for k, v in flt.as_dict().items()]
    return " ".join(parts) if parts else "every job"


@dataclass
class DetailLoaded(Message):
    """A job's detail arrived (``data`` None when it is gone; ``note`` says why)."""

    job_id: uuid.UUID
    data: JobDetailData | None
    now: datetime
    note: str = ""


@dataclass
class BulkPreviewed(Message):
    """The dry run of a bulk action: how many jobs it would change."""

    action: str
    flt: JobFilter
    preview: BulkPreview


@dataclass
class BulkProgressed(Message):
    """A bulk action committed another batch."""

    action: str
    done: int
    total: int


class JobsScreen(ViewScreen):
    """Jobs by filter, newest first; the selected job's detail beside (or below) them."""

    VIEW = "jobs"
    WRITE_ACTIONS = frozenset({"retry", "cancel", "discard", "wake", "park", "bulk"})
    BINDINGS = [
        Binding("r", "retry", "Retry"),
        Binding("c", "cancel", "Cancel"),
        Binding("d", "discard", "Discard"),
        Binding("w", "wake", "Wake"),
        Binding("k", "park", "Park"),
        Binding("R", "bulk('retry')", "Bulk retry"),
        Binding("C", "bulk('cancel')", "Bulk cancel"),
        Binding("D", "bulk('discard')", "Bulk discard"),
        Binding("n", "page(1)", "Next page"),
        Binding("p", "page(-1)", "Prev page"),
        Binding("slash", "focus_filter('search')", "Search"),
        Binding("f", "focus_filter('state')", "Filter"),
        Binding("z", "zoom", "Zoom detail"),
        Binding("escape", "focus_table", "Table", show=False),
    ]

    def __init__(self, adapter: Any) -> None:
        super().__init__(adapter)
        self.flt = JobFilter()
        self.cursors: list[str | None] = [None]
        self.next_cursor: str | None = None
        self.jobs: dict[str, Job] = {}
        self.total: int | None = None
        self._count_in = 0
        self.detail_id: uuid.UUID | None = None
        self.bulk_note = ""

    def compose_body(self) -> ComposeResult:
        with Horizontal(id="filters"):
            for field in FILTER_FIELDS:
                yield Input(placeholder=field, id=f"f-{field}", compact=True)
        yield Static(id="status", classes="status")
        with Horizontal(id="jobs-body"):
            table: DataTable[Any] = DataTable(id="jobs", cursor_type="row", zebra_stripes=True)
            for column in ("id", "state", "queue", "worker", "att", "scheduled", "tags", "error"):
                table.add_column(column, key=column)
            yield table
            yield JobDetailPane(id="detail")

    def on_mount(self) -> None:
        self.query_one("#jobs", DataTable).focus()

    def on_resize(self, event: events.Resize) -> None:
        self.query_one("#jobs-body").set_class(event.size.width < 120, "-narrow")

    # --- data ------------------------------------------------------------------------------

    def fetch(self, now: datetime) -> JobsData:
        with_total = self._count_in <= 0
        return self.adapter.jobs(
            self.flt, cursor=self.cursors[-1], limit=PAGE_SIZE, with_total=with_total
        )

    def show(self, data: Any, now: datetime) -> None:
        assert isinstance(data, JobsData)
        if data.total is not None:
            self.total = data.total
            self._count_in = RECOUNT_EVERY
        self._count_in -= 1
        self.next_cursor = data.page.next_cursor
        self.jobs = {str(j.id): j for j in data.page.jobs}
        rows: list[Row] = []
        for job in data.page.jobs:
            last_error = job.errors[-1].error if job.errors else ""
            rows.append((
                str(job.id),
                [
                    Text(short_id(job.id), style="dim"),
                    state_text(job.state),
                    job.queue,
                    job.worker,
                    Text(f"{job.attempt}/{job.max_attempts}", justify="right"),
                    relative(job.scheduled_at, now),
                    first_line(",".join(job.tags), 24),
                    Text(first_line(last_error, 60), style="red"),
                ],
            ))
        table = self.query_one("#jobs", DataTable)
        refill(table, rows)
        self._show_status()
        key = selected_key(table)
        self._select(uuid.UUID(key) if key else None, force=True)

    def _show_status(self) -> None:
        text = Text()
        text.append(f"page {len(self.cursors)}", style="bold")
        text.append(f" · {len(self.jobs)} shown")
        if self.total is not None:
            text.append(f" · {count(self.total)} match")
        text.append(f" · {describe_filter(self.flt)}", style="italic")
        if self.next_cursor:
            text.append(" · n: older", style="dim")
        if len(self.cursors) > 1:
            text.append(" · p: newer", style="dim")
        if self.bulk_note:
            text.append(f" · {self.bulk_note}", style="bold yellow")
        self.query_one("#status", Static).update(text)

    @on(DataTable.RowHighlighted, "#jobs")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        key = event.row_key.value
        self._select(uuid.UUID(key) if key else None, force=False)

    def _select(self, job_id: uuid.UUID | None, *, force: bool) -> None:
        if job_id is None:
            self.detail_id = None
            self.query_one(JobDetailPane).show_job(None, self.adapter.now(), note="no job here")
            return
        if job_id != self.detail_id or force:
            self.detail_id = job_id
            self._load_detail(job_id)

    @work(thread=True, exclusive=True, group="detail")
    def _load_detail(self, job_id: uuid.UUID) -> None:
        now = self.adapter.now()
        try:
            data = self.adapter.job(job_id, now)
        except Exception as exc:
            self.post_message(DetailLoaded(job_id, None, now, describe_failure(exc)))
        else:
            self.post_message(DetailLoaded(job_id, data, now))

    def on_detail_loaded(self, message: DetailLoaded) -> None:
        message.stop()
        if message.job_id == self.detail_id:
            self.query_one(JobDetailPane).show_job(message.data, message.now, note=message.note)

    # --- filters and paging -----------------------------------------------------------------

    @on(Input.Submitted)
    def _apply_filter(self, event: Input.Submitted) -> None:
        values = {f: self.query_one(f"#f-{f}", Input).value for f in FILTER_FIELDS}
        try:
            flt = parse_filter(values)
        except InvalidArgumentError as exc:
            self.notify(str(exc), title="filter", severity="error")
            return
        self.flt = flt
        self.cursors = [None]
        self._count_in = 0
        self.query_one("#jobs", DataTable).focus()
        self.reload()

    def action_page(self, step: int) -> None:
        if step > 0:
            if self.next_cursor is None:
                self.notify("this is the last page")
                return
            self.cursors.append(self.next_cursor)
        else:
            if len(self.cursors) == 1:
                self.notify("this is the first page")
                return
            self.cursors.pop()
        self.query_one("#jobs", DataTable).move_cursor(row=0)
        self.reload()

    def action_focus_filter(self, field: str) -> None:
        self.query_one(f"#f-{field}", Input).focus()

    def action_focus_table(self) -> None:
        if self.screen.maximized is not None:
            self.screen.minimize()
        self.query_one("#jobs", DataTable).focus()

    def action_zoom(self) -> None:
        if self.maximized is not None:
            self.minimize()
        else:
            self.maximize(self.query_one(JobDetailPane), container=False)

    # --- actions ----------------------------------------------------------------------------

    def _selected(self) -> Job | None:
        key = selected_key(self.query_one("#jobs", DataTable))
        job = self.jobs.get(key) if key else None
        if job is None:
            self.notify("select a job first", severity="warning")
        return job

    def action_retry(self) -> None:
        if (job := self._selected()) is not None:
            self.act("retry", lambda now: _moved(self.adapter.retry(job.id, now), "retried"))

    def action_cancel(self) -> None:
        if (job := self._selected()) is not None:
            self.act(
                "cancel",
                lambda now: _moved(self.adapter.cancel(job.id, now), "cancelled"),
                confirm=f"Cancel job {job.id}?\n{job.worker} on {job.queue}, "
                f"now {job.state.value}.",
            )

    def action_discard(self) -> None:
        if (job := self._selected()) is not None:
            self.act(
                "discard",
                lambda now: _moved(self.adapter.discard(job.id, now), "discarded"),
                confirm=f"Discard job {job.id}?\n{job.worker} on {job.queue}, "
                f"now {job.state.value}.",
            )

    def action_wake(self) -> None:
        if (job := self._selected()) is not None:
            self.act("wake", lambda now: self.adapter.wake(job.id, now))

    def action_park(self) -> None:
        if (job := self._selected()) is not None:
            self.act(
                "park",
                lambda now: _moved(self.adapter.park(job.id, now), "parked"),
                confirm=f"Park slot job {job.id}?\nIts pending demand and wakes are cleared.",
            )

    def action_bulk(self, action: str) -> None:
        if self.adapter.read_only:
            self.notify(f"read-only dashboard: bulk {action} is disabled", severity="warning")
            return
        self._preview(action, self.flt)

    @work(thread=True, exclusive=True, group="preview")
    def _preview(self, action: str, flt: JobFilter) -> None:
        try:
            preview = self.adapter.preview(action, flt)
        except Exception as exc:
            self.post_message(ActionFinished(f"bulk {action}: {describe_failure(exc)}", False))
        else:
            self.post_message(BulkPreviewed(action, flt, preview))

    def on_bulk_previewed(self, message: BulkPreviewed) -> None:
        message.stop()
        action, flt, preview = message.action, message.flt, message.preview
        if preview.count == 0:
            self.notify(f"bulk {action}: no job matching {describe_filter(flt)} qualifies")
            return
        sample = "\n".join(
            f"  {short_id(j.id)} {j.worker} {j.state.value}" for j in preview.sample
        )
        question = (
            f"Bulk {action} {count(preview.count)} job(s) matching {describe_filter(flt)}?\n"
            f"(dry run count; jobs that change meanwhile are skipped)\n{sample}"
        )

        def decided(answer: bool | None) -> None:
            if answer:
                self.bulk_note = f"bulk {action}: starting"
                self._show_status()
                self._bulk_apply(action, flt)

        self.app.push_screen(ConfirmScreen(question, verb=f"Bulk {action}"), decided)

    @work(thread=True, group="action")
    def _bulk_apply(self, action: str, flt: JobFilter) -> None:
        def progress(done: int, total: int) -> None:
            self.post_message(BulkProgressed(action, done, total))

        try:
            result = self.adapter.bulk(action, flt, self.adapter.now(), on_progress=progress)
        except Exception as exc:
            self.post_message(ActionFinished(f"bulk {action}: {describe_failure(exc)}", False))
        else:
            self.post_message(ActionFinished(
                f"bulk {action}: {result.changed} changed, {result.skipped} skipped "
                f"of {result.matched} matched", ok=True,
            ))

    def on_bulk_progressed(self, message: BulkProgressed) -> None:
        message.stop()
        self.bulk_note = f"bulk {message.action}: {message.done}/{message.total}"
        self._show_status()

    def on_action_finished(self, message: ActionFinished) -> None:
        # Textual then runs ViewScreen's handler too (it notifies and reloads).
        if message.message.startswith("bulk"):
            self.bulk_note = ""
        self._count_in = 0

    def palette_commands(self) -> Iterable[SystemCommand]:
        for action, label in (("retry", "Retry"), ("cancel", "Cancel"), ("discard", "Discard")):
            yield SystemCommand(
                f"Bulk {action} the filtered jobs",
                f"{label} every job matching the current filter (asks first)",
                lambda a=action: self.action_bulk(a),
            )
        yield SystemCommand("Next page", "Older jobs", lambda: self.action_page(1))
        yield SystemCommand("Previous page", "Newer jobs", lambda: self.action_page(-1))


def _moved(job: Job, verb: str) -> str:
    return f"job {short_id(job.id)} {verb}: now {job.state.value}"


__all__ = ["JobsScreen", "describe_filter", "parse_filter"]
