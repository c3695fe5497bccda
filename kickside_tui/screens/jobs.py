"""Jobs: a filterable, keyset-paged table with a detail pane and single and bulk actions."""

from __future__ import annotations

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
from kickside_engine.control import JobFilter, declared_sensitive_keys
from kickside_tui.adapter import JobDetailData, JobsData
from kickside_tui.screens.base import ActionFinished, describe_failure
from kickside_tui.screens.bulk import BulkActions
from kickside_tui.screens.job_actions import JOB_ACTION_BINDINGS, JOB_WRITE_ACTIONS, JobActions
from kickside_tui.screens.job_filter import FILTER_FIELDS, describe_filter, parse_filter
from kickside_tui.widgets.format import first_line, relative, short_id, state_text
from kickside_tui.widgets.job_detail import JobDetailPane
from kickside_tui.widgets.job_status import JobsStatus, render_status
from kickside_tui.widgets.tables import Row, selected_key
from kickside_tui.widgets.view_table import Col, Ordered, ViewTable

#: The table's columns, the ones an operator needs most kept on a narrow terminal.
COLUMNS = (
    Col("id", "id"),
    Col("state", "state"),
    Col("queue", "queue", drop=1),
    Col("worker", "worker"),
    Col("att", "att", drop=2),
    Col("scheduled", "scheduled", "sched", drop=1),
    Col("tags", "tags", drop=3),
    # Beside the detail pane (which shows the selected job's errors in full) it goes first.
    Col("error", "error", drop=2, flex=True),
)

PAGE_SIZE = 50
#: Counting every match costs a scan on big tables: recount on filter changes and now and then.
RECOUNT_EVERY = 10


@dataclass
class DetailLoaded(Message):
    """A job's detail arrived (``data`` None when it is gone; ``note`` says why)."""

    job_id: uuid.UUID
    data: JobDetailData | None
    now: datetime
    note: str = ""


@dataclass
class SearchProgressed(Message):
    """A search read another window of the table: matches so far, and how far back."""

    generation: int
    found: int
    scanned_to: datetime | None


class JobsScreen(JobActions, BulkActions):
    """Jobs by filter, newest first; the selected job's detail beside (or below) them."""

    VIEW = "jobs"
    WRITE_ACTIONS = JOB_WRITE_ACTIONS | {"bulk"}
    BINDINGS = [
        *JOB_ACTION_BINDINGS,
        Binding("b", "bulk", "Bulk…"),
        Binding("n", "page(1)", "Next page"),
        Binding("p", "page(-1)", "Prev page"),
        Binding("slash", "focus_filter('search')", "Search"),
        Binding("f", "focus_filter('state')", "Filter"),
        Binding("z", "zoom", "Zoom detail"),
        Binding("escape", "focus_table", "Table / stop search", show=False),
        # With Caps Lock on, a key arrives as its capital: say so rather than do anything.
        *(Binding(key, f"capital('{key}')", show=False) for key in "RCDWAEBNPFZJKSY"),
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
        # A search reads the table window by window; a new filter or page starts a new
        # generation, and the answers of older ones are dropped.
        self._generation = 0
        self._stop_search = False
        self.searching: tuple[int, datetime | None] | None = None
        self.last_search: JobsData | None = None
        self.searched_at: datetime | None = None

    def compose_body(self) -> ComposeResult:
        with Horizontal(id="filters"):
            for field in FILTER_FIELDS:
                yield Input(placeholder=field, id=f"f-{field}", compact=True)
        yield Static(id="status", classes="status")
        with Horizontal(id="jobs-body"):
            # "/" on the table goes on to the view: it searches the database, not the page.
            yield ViewTable(COLUMNS, id="jobs", copy_what="job id", filterable=False)
            yield JobDetailPane(id="detail")

    def on_mount(self) -> None:
        self.query_one("#jobs", DataTable).focus()
        self.watch(self, "maximized", self._zoom_changed, init=False)

    def on_resize(self, event: events.Resize) -> None:
        self.query_one("#jobs-body").set_class(event.size.width < 120, "-narrow")

    # --- data ------------------------------------------------------------------------------

    def fetch(self, now: datetime) -> tuple[int, JobsData]:
        flt, start, generation = self.flt, self.cursors[-1], self._generation
        if not flt.search:
            with_total = self._count_in <= 0
            data = self.adapter.jobs(flt, cursor=start, limit=PAGE_SIZE, with_total=with_total)
            return generation, data
        self._stop_search = False

        def progress(found: int, scanned_to: datetime | None) -> None:
            self.post_message(SearchProgressed(generation, found, scanned_to))

        def stop() -> bool:
            return self._stop_search or self._generation != generation

        return generation, self.adapter.search(
            flt, cursor=start, limit=PAGE_SIZE, on_progress=progress, stop=stop
        )

    def auto_reload(self) -> None:
        """Refresh on the timer, except a search that needed several windows (costly)."""
        if self.flt.search and self.last_search is not None and self.last_search.windows > 1:
            return
        self.reload()

    def on_search_progressed(self, message: SearchProgressed) -> None:
        message.stop()
        if message.generation == self._generation:
            self.searching = (message.found, message.scanned_to)
            self._show_status()

    def show(self, data: Any, now: datetime) -> None:
        generation, data = data
        assert isinstance(data, JobsData)
        if generation != self._generation:
            return  # the answer to a filter or page that is no longer shown
        self.searching = None
        self.last_search = data if self.flt.search else None
        self.searched_at = now if data.windows > 1 else None
        if self.flt.search:
            self.total = None
        elif data.total is not None:
            self.total = data.total
            self._count_in = RECOUNT_EVERY
        self._count_in -= 1
        self.next_cursor = data.page.next_cursor
        self.jobs = {str(j.id): j for j in data.page.jobs}
        rows: list[Row] = []
        for job in data.page.jobs:
            last_error = job.errors[-1].error if job.errors else ""
            rows.append(
                (
                    str(job.id),
                    [
                        Ordered(Text(short_id(job.id), style="dim"), str(job.id)),
                        state_text(job.state),
                        job.queue,
                        job.worker,
                        Ordered(f"{job.attempt}/{job.max_attempts}", job.attempt, justify="right"),
                        Ordered(relative(job.scheduled_at, now), job.scheduled_at),
                        first_line(",".join(job.tags), 24),
                        Text(
                            first_line(last_error, 60, declared_sensitive_keys(job.meta)),
                            style="red",
                        ),
                    ],
                )
            )
        table = self.query_one("#jobs", ViewTable)
        table.fill(rows)
        self._show_status()
        key = selected_key(table)
        self._select(uuid.UUID(key) if key else None, force=True)

    def _show_status(self) -> None:
        search = self.last_search
        status = JobsStatus(
            page=len(self.cursors),
            shown=len(self.jobs),
            total=self.total,
            filter_text=describe_filter(self.flt),
            has_older=self.next_cursor is not None,
            has_newer=len(self.cursors) > 1,
            search=bool(self.flt.search),
            searching=self.searching,
            stopped_at=search.scanned_to if search is not None else None,
            searched_at=self.searched_at,
            note=self.bulk_note,
        )
        self.query_one("#status", Static).update(render_status(status))

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
        self._new_generation()
        self.reload()

    def _new_generation(self) -> None:
        """Forget the shown page's search (a running one stops after its current window)."""
        self._generation += 1
        self.last_search = None
        self.searched_at = None
        self.searching = (0, None) if self.flt.search else None
        if self.searching is not None:
            self._show_status()

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
        self._new_generation()
        self.reload()

    def action_focus_filter(self, field: str) -> None:
        if self.maximized is not None:
            self.minimize()  # the filters are hidden in zoom: never type into an unseen box
        self.query_one(f"#f-{field}", Input).focus()

    def action_focus_table(self) -> None:
        if self.searching is not None:
            self._stop_search = True  # the page keeps what was found; n continues the search
        if self.screen.maximized is not None:
            self.screen.minimize()
        self.query_one("#jobs", DataTable).focus()

    def action_zoom(self) -> None:
        if self.maximized is not None:
            self.minimize()
        else:
            pane = self.query_one(JobDetailPane)
            self.maximize(pane, container=False)
            pane.focus()  # keys act on the job shown; none is typed into a filter

    def _zoom_changed(self, maximized: object) -> None:
        """Back from zoom (``z`` or escape): the list has the focus again."""
        if maximized is None:
            self.query_one("#jobs", DataTable).focus()

    @on(DataTable.RowSelected, "#jobs")
    def _open(self, event: DataTable.RowSelected) -> None:
        """Enter on a job: its detail, zoomed (escape comes back)."""
        if self.maximized is None:
            self.action_zoom()

    # --- actions ----------------------------------------------------------------------------

    def _selected(self) -> Job | None:
        key = selected_key(self.query_one("#jobs", DataTable))
        job = self.jobs.get(key) if key else None
        if job is None:
            self.notify("select a job first", severity="warning")
        return job

    def on_action_finished(self, message: ActionFinished) -> None:
        # Textual then runs ViewScreen's handler too (it notifies and reloads).
        if message.message.startswith("bulk"):
            self.bulk_note = ""
        self._count_in = 0

    def palette_commands(self) -> Iterable[SystemCommand]:
        for action, label in (("retry", "Retry"), ("cancel", "Cancel"), ("discard", "Discard")):
            yield SystemCommand(
                f"Bulk {action} the filtered jobs",
                f"{label} the jobs matching the current filter (previews, then asks)",
                lambda a=action: self.action_bulk(a),
            )


__all__ = ["JobsScreen", "describe_filter", "parse_filter"]
