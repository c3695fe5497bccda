"""One job, opened from any row that is a job (Leases, Slots, Capacity, cron): its detail and
its live log, with the single-job actions; escape goes back to the list."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding

from kickside_engine import Job, NotFoundError
from kickside_tui.adapter import Adapter, JobDetailData
from kickside_tui.screens.job_actions import JOB_ACTION_BINDINGS, JOB_WRITE_ACTIONS, JobActions
from kickside_tui.widgets.format import short_id
from kickside_tui.widgets.job_detail import JobDetailPane


class JobScreen(JobActions):
    """The detail of one job, reloaded with every refresh while it is open."""

    WRITE_ACTIONS = JOB_WRITE_ACTIONS
    BINDINGS = [
        Binding("escape", "back", "Back"),
        *JOB_ACTION_BINDINGS,
        # With Caps Lock on, a key arrives as its capital: say so rather than do anything.
        *(Binding(key, f"caps_lock('{key}')", show=False) for key in "RCDWAEJKY"),
    ]

    def __init__(self, adapter: Adapter, job_id: uuid.UUID, *, view: str = "") -> None:
        super().__init__(adapter)
        self.job_id = job_id
        #: The view bar highlights the view the job was opened from.
        self.VIEW = view  # type: ignore[misc]
        self.job: Job | None = None

    def compose_body(self) -> ComposeResult:
        yield JobDetailPane(id="job-detail")

    def on_mount(self) -> None:
        self.query_one(JobDetailPane).focus()

    def fetch(self, now: datetime) -> JobDetailData | None:
        try:
            return self.adapter.job(self.job_id, now)
        except NotFoundError:
            return None  # pruned, purged or deleted since: said in the pane, not a banner

    def show(self, data: Any, now: datetime) -> None:
        pane = self.query_one(JobDetailPane)
        if data is None:
            self.job = None
            pane.show_job(
                None, now, note=f"job {self.job_id} no longer exists (pruned, purged or deleted)"
            )
            return
        assert isinstance(data, JobDetailData)
        self.job = data.detail.job
        pane.show_job(data, now)

    def _selected(self) -> Job | None:
        if self.job is None:
            self.notify(f"job {short_id(self.job_id)} is not loaded", severity="warning")
        return self.job

    def action_back(self) -> None:
        self.dismiss()

    def action_caps_lock(self, key: str) -> None:
        """A capital letter does nothing here: the operator may have Caps Lock on."""
        self.notify(
            f"{key} does nothing here (Caps Lock on?): actions use lower-case keys",
            severity="warning",
        )
