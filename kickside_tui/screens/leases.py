"""Leases: executing jobs with owner node, expiry countdown, heartbeat, rescues and code."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Static

from kickside_engine.control import NODE_STALE_AFTER
from kickside_tui.adapter import LeaseInfo
from kickside_tui.screens.base import ViewScreen
from kickside_tui.widgets.format import count, short_id, span
from kickside_tui.widgets.tables import Row, refill, selected_key


def _expiry(left: timedelta | None) -> Text:
    if left is None:
        return Text("-", style="dim")
    if left <= timedelta(0):
        return Text(f"expired {span(left)} ago", style="bold red")
    return Text(f"in {span(left)}", style="yellow" if left < timedelta(seconds=10) else "")


def _heartbeat(age: timedelta | None) -> Text:
    if age is None:
        return Text("no node row", style="bold red")
    style = "bold red" if age > NODE_STALE_AFTER else ""
    return Text(f"{span(age)} ago", style=style)


def _elapsed(lease: LeaseInfo) -> Text:
    elapsed = lease.elapsed
    if elapsed is None:
        return Text("-", style="dim")
    limit = lease.max_execution
    text = Text(span(elapsed))
    if limit is not None:
        text.append(f" / {span(limit)}", style="dim")
        if elapsed > limit:
            text.stylize("bold red")
    return text


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
        table: DataTable[Any] = DataTable(id="leases", cursor_type="row", zebra_stripes=True)
        for column in ("id", "worker", "queue", "node", "lease expires", "heartbeat",
                       "rescued", "elapsed / max", "code", "attempt"):
            table.add_column(column, key=column)
        yield table

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
            rows.append((
                str(job.id),
                [
                    Text(short_id(job.id), style="dim"),
                    job.worker,
                    job.queue,
                    lease.node or "-",
                    _expiry(lease.expires_in),
                    _heartbeat(lease.heartbeat_age),
                    Text(str(job.rescue_count), justify="right",
                         style="dark_orange" if job.rescue_count else "dim"),
                    _elapsed(lease),
                    lease.code_version or "-",
                    Text(f"{job.attempt}/{job.max_attempts}", justify="right"),
                ],
            ))
        refill(self.query_one("#leases", DataTable), rows)
        expired = sum(
            1 for x in leases if x.expires_in is not None and x.expires_in <= timedelta(0)
        )
        status = Text(f"{count(len(leases))} executing")
        if expired:
            status.append(f" · {expired} lease(s) expired, awaiting rescue", style="bold red")
        status.append(" · c cancel · d discard (the node stops the run)", style="dim")
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
                lambda now: f"job {short_id(job.id)} "
                f"{self.adapter.cancel(job.id, now).state.value}",
                confirm=f"Cancel executing job {job.id}?\n{job.worker} on {lease.node}: its "
                "node stops the run.",
            )

    def action_discard(self) -> None:
        if (lease := self._selected()) is not None:
            job = lease.job
            self.act(
                "discard",
                lambda now: f"job {short_id(job.id)} "
                f"{self.adapter.discard(job.id, now).state.value}",
                confirm=f"Discard executing job {job.id}?\n{job.worker} on {lease.node}: its "
                "node stops the run.",
            )
