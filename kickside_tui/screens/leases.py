"""Leases: executing jobs with owner node, expiry countdown, heartbeat, rescues, progress and
code."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Static

from kickside_engine import Job
from kickside_engine.control import NODE_STALE_AFTER, shown_progress
from kickside_tui.adapter import LeaseInfo
from kickside_tui.screens.base import ViewScreen
from kickside_tui.widgets.format import count, short_id, span
from kickside_tui.widgets.tables import Row, selected_key
from kickside_tui.widgets.view_table import Col, Ordered, ViewTable, job_key


def _expiry(left: timedelta | None) -> Text:
    if left is None:
        return Ordered(Text("-", style="dim"), None)
    if left <= timedelta(0):
        return Ordered(f"expired {span(left)} ago", left, style="bold red")
    return Ordered(f"in {span(left)}", left, style="yellow" if left < timedelta(seconds=10) else "")


def _heartbeat(age: timedelta | None) -> Text:
    if age is None:
        return Ordered(Text("no node row", style="bold red"), None)
    style = "bold red" if age > NODE_STALE_AFTER else ""
    return Ordered(f"{span(age)} ago", age, style=style)


def _elapsed(lease: LeaseInfo) -> Text:
    elapsed = lease.elapsed
    if elapsed is None:
        return Ordered(Text("-", style="dim"), None)
    limit = lease.max_execution
    text = Text(span(elapsed))
    if limit is not None:
        text.append(f" / {span(limit)}", style="dim")
        if elapsed > limit:
            text.stylize("bold red")
    return Ordered(text, elapsed)


#: How much of a progress object the Leases table shows (the detail shows all of it).
PROGRESS_CELL_CHARS = 32


def _progress(job: Job) -> Text:
    shown = shown_progress(job, width=PROGRESS_CELL_CHARS)
    # Empty when none: a column no job reports to goes first on a narrow terminal.
    return Text(shown or "")  # sorted by its text, numbers as numbers


#: The columns, the ones an operator needs most kept on a narrow terminal: which job, where,
#: when its lease runs out, and how long it has run against its limit.
COLUMNS = (
    Col("id", "id"),
    Col("worker", "worker"),
    Col("queue", "queue", drop=2),
    Col("node", "node", drop=1, flex=True),
    Col("lease expires", "lease expires", "expires"),
    Col("heartbeat", "heartbeat", "beat", drop=2),
    Col("rescued", "rescued", "resc", drop=3),
    Col("elapsed / max", "elapsed / max", "elapsed/max"),
    Col("progress", "progress", "prog", drop=2),
    Col("code", "code", drop=3),
    Col("attempt", "attempt", "att", drop=2),
)


class LeasesScreen(ViewScreen):
    """Cancel or discard an executing job from here (its node stops it)."""

    VIEW = "leases"
    WRITE_ACTIONS = frozenset({"cancel", "discard"})
    BINDINGS = [
        Binding("c", "cancel", "Cancel"),
        Binding("d", "discard", "Discard"),
    ]

    def __init__(self, adapter: Any) -> None:
        super().__init__(adapter)
        self.leases: dict[str, LeaseInfo] = {}

    def compose_body(self) -> ComposeResult:
        yield Static(id="status", classes="status")
        yield ViewTable(COLUMNS, id="leases", copy_what="job id", job_of=job_key)

    def on_mount(self) -> None:
        self.query_one("#leases", DataTable).focus()

    def fetch(self, now: datetime) -> list[LeaseInfo]:
        return self.adapter.leases(now)

    def show(self, data: Any, now: datetime) -> None:
        leases: list[LeaseInfo] = data
        self.leases = {str(lease.job.id): lease for lease in leases}
        rows: list[Row] = []
        for lease in leases:
            job = lease.job
            rows.append(
                (
                    str(job.id),
                    [
                        Ordered(Text(short_id(job.id), style="dim"), str(job.id)),
                        job.worker,
                        job.queue,
                        lease.node or "-",
                        _expiry(lease.expires_in),
                        _heartbeat(lease.heartbeat_age),
                        Text(
                            str(job.rescue_count),
                            justify="right",
                            style="dark_orange" if job.rescue_count else "dim",
                        ),
                        _elapsed(lease),
                        _progress(job),
                        lease.code_version or "-",
                        Ordered(f"{job.attempt}/{job.max_attempts}", job.attempt, justify="right"),
                    ],
                )
            )
        self.query_one("#leases", ViewTable).fill(rows)
        expired = sum(
            1 for x in leases if x.expires_in is not None and x.expires_in <= timedelta(0)
        )
        status = Text(f"{count(len(leases))} executing")
        if expired:
            status.append(f" · {expired} lease(s) expired, awaiting rescue", style="bold red")
        status.append(
            " · enter opens the job · c cancel · d discard (the node stops the run)", style="dim"
        )
        self.query_one("#status", Static).update(status)

    def _selected(self) -> LeaseInfo | None:
        key = selected_key(self.query_one("#leases", DataTable))
        lease = self.leases.get(key) if key else None
        if lease is None:
            self.notify("select an executing job first", severity="warning")
        return lease

    def action_cancel(self) -> None:
        if (lease := self._selected()) is not None:
            job = lease.job
            self.act(
                "cancel",
                lambda now: (
                    f"job {short_id(job.id)} {self.adapter.cancel(job.id, now).state.value}"
                ),
                confirm=f"Cancel executing job {job.id}?\n{job.worker} on {lease.node}: its "
                "node stops the run.",
            )

    def action_discard(self) -> None:
        if (lease := self._selected()) is not None:
            job = lease.job
            self.act(
                "discard",
                lambda now: (
                    f"job {short_id(job.id)} {self.adapter.discard(job.id, now).state.value}"
                ),
                confirm=f"Discard executing job {job.id}?\n{job.worker} on {lease.node}: its "
                "node stops the run.",
            )
